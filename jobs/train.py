"""Training entrypoint for ``ray job submit``:

ray job submit --working-dir . -- python jobs/train.py --config jobs/configs/quickstart.yaml [key=value ...]
"""

import argparse
import sys

from distalign.cli import main

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True)
    args, overrides = parser.parse_known_args()
    sys.exit(main(["train", args.config, *overrides]))
