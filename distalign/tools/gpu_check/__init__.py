"""The project's GPU check: one command that runs distalign's GPU paths on a machine with a GPU and writes one report.

    python3 -m distalign.tools.gpu_check --site .gpu-carry/site.tar.xz      # on the GPU machine (make gpu-check)
    python3 -m distalign.tools.gpu_check --cpu                              # the same steps rehearsed on CPU

``steps`` lists what runs (each under its own timeout, side by side, within one time budget), ``run`` runs it,
``figures`` reads what the steps measured (MLflow runs, the bench tables, the test results), ``check_report`` writes
``report.md`` and ``report.json``. What a bare CUDA image lacks (Ray, DeepSpeed, MLflow, ...) travels as a stripped
site folder: ``wheelhouse`` builds it here (``make wheelhouse``), ``site_install`` unpacks it there.
Nothing here imports more than the standard library at the top: the check starts before the carried packages are
in place.
"""
