"""The `dagger` command line (`main`) and its SQL console (`console`)."""
