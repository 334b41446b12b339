"""Ray Tune studies: the study file and its trials (``study``), running them (``runner``), and the study's
tables and plots in MLflow (``report``)."""

from distalign.studies.runner import run_study
from distalign.studies.study import StudyConfig, load_study

__all__ = ["StudyConfig", "load_study", "run_study"]
