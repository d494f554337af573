module kubenest.local/pause

go 1.22
