"""The inputs of the check's transfer step, without Ray: the quickstart's synthetic world with transfer tasks
(udpos, pawsx) and its untrained tiny model, linked as ``DIR/tasks`` and ``DIR/model``.

    python -m distalign.tools.gpu_check.transfer_inputs DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

from distalign.config import load_config
from distalign.preparation.inputs import prepare_data, synthetic_world

WORLD = [
    "data.synthetic.transfer_examples=200",
    "data.synthetic.num_concepts=300",
    "data.synthetic.sentences_per_language=600",
]


def main(directory: str) -> int:
    config = load_config("jobs/configs/quickstart.yaml", WORLD)
    prepared = prepare_data(config)  # the world (cached) and the tiny model built on its text
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    for name, target in (("model", Path(prepared.model_path)), ("tasks", synthetic_world(config).transfer_tasks)):
        link = out / name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(target.resolve(), target_is_directory=True)
        print(f"{link} -> {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
