"""``python -m irtrace.cli``."""

from irtrace.cli.main import main

raise SystemExit(main())
