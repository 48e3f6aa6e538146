import sys

try:
    from harness.cli import main
except KeyboardInterrupt:  # Ctrl-C while the harness (torch, triton) is still importing: one line, no traceback
    print("interrupted", file=sys.stderr)
    sys.exit(130)

sys.exit(main())
