"""The transfer task plugins by name: ``distalign transfer --tasks xnli,udpos`` runs ``TRANSFER_TASKS[name]``.

Adding a task = a subclass of a family in ``pair.py`` or ``tagging.py`` (its name, Hub data set, labels and
hyper-parameters with their source) and one line here. Extractive QA (XQuAD, MLQA, TyDiQA-GoldP) is a
family still to come.
"""

from __future__ import annotations

from distalign.transfer.tasks.base import TransferTask
from distalign.transfer.tasks.pair import PAWSXTask, XNLITask
from distalign.transfer.tasks.tagging import UDPOSTask, WikiANNTask

TRANSFER_TASKS: dict[str, type[TransferTask]] = {
    "xnli": XNLITask,
    "pawsx": PAWSXTask,
    "wikiann": WikiANNTask,
    "udpos": UDPOSTask,
}
