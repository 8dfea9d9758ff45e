from jobs.cli.main import main

raise SystemExit(main())
