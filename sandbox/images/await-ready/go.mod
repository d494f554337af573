module kubenest.local/await-ready

go 1.26.0
