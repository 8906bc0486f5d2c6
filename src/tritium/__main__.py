from tritium.cli.main import main

raise SystemExit(main())
