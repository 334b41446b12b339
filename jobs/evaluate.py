"""Evaluation entrypoint for ``ray job submit`` (same arguments as ``distalign eval``):

    ray job submit --working-dir . -- python jobs/evaluate.py --checkpoint /shared/runs/quickstart/checkpoint_... \
        --eval-dir /shared/data/eval --tasks bli,xlsim,tatoeba
"""

import sys

from distalign.cli import main

if __name__ == "__main__":
    sys.exit(main(["eval", *sys.argv[1:]]))
