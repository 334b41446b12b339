"""Experiments and Ray Tune studies of them: one experiment trained then transferred (``experiment``, as
``distalign train`` and every trial run it), the study file and its trials (``study``), running them (``tune_run``),
and the study's tables and plots in MLflow (``study_results``)."""

from distalign.studies.study import StudyConfig, load_study
from distalign.studies.tune_run import run_study

__all__ = ["StudyConfig", "load_study", "run_study"]
