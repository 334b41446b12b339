"""The transfer task plugins by name: ``distalign transfer --tasks xnli,udpos`` runs ``TRANSFER_TASKS[name]``.

Adding a task = a subclass of a family in ``pair.py``, ``tagging.py`` or ``qa.py`` (its name, Hub data set,
labels and hyper-parameters with their source) and one line here.
"""

from __future__ import annotations

from distalign.transfer.tasks.base import TransferTask
from distalign.transfer.tasks.pair import PAWSXTask, XNLITask
from distalign.transfer.tasks.qa import MLQATask, TyDiQATask, XQuADTask
from distalign.transfer.tasks.tagging import UDPOSTask, WikiANNTask

TRANSFER_TASKS: dict[str, type[TransferTask]] = {
    "xnli": XNLITask,
    "pawsx": PAWSXTask,
    "wikiann": WikiANNTask,
    "udpos": UDPOSTask,
    "xquad": XQuADTask,
    "mlqa": MLQATask,
    "tydiqa": TyDiQATask,
}
