module kubenest.local/echo

go 1.22
