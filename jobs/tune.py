"""Study entrypoint for ``ray job submit``:

ray job submit --working-dir . -- python jobs/tune.py tuning/language_samples_tiny.yaml [key=value ...]
"""

import sys

from distalign.cli import main

if __name__ == "__main__":
    sys.exit(main(["tune", *sys.argv[1:]]))
