module kubenest.local/follow-log

go 1.26.0
