"""The bad-input campaign (issue #38): for every command, the inputs users get wrong, each answered by one clear
message naming the input and what to do, a non-zero exit status, no traceback, in under 10 s, and before Ray starts
where the input can be checked there.

``CASES`` is the table: one row per wrong input, run in-process through ``distalign.cli.main`` (``ray.init``
replaced by a trap: a case that reaches Ray fails). docs/reference/bad-inputs.md is generated from it
(``python tests/test_bad_inputs.py``), and ``test_the_page_lists_exactly_the_cases`` fails when they differ.
A few rows also run as real processes of the console script and of jobs/*.py (marked heavy).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import REPO, free_port

PAGE = REPO / "docs" / "reference" / "bad-inputs.md"
# rows also run as real processes (heavy): the console script with and without Ray, and a jobs/ entry script
SUBPROCESS_CASES = ("train-config-missing", "align-vecmap-no-tgt-out", "job-train-no-config")
LIMIT_S = 10.0


@dataclass(frozen=True)
class Case:
    id: str
    command: str  # as typed after `distalign` (or the jobs/ script)
    wrong: str  # the wrong input, in words
    argv: tuple[str, ...]  # {name} placeholders: the inputs built by ``build_inputs``
    says: tuple[str, ...]  # parts of the message: the input named, and what to do ({name} placeholders too)
    ray: str = "yes"  # "yes": stopped before Ray; "no Ray": a command that never starts Ray
    fixed: bool = False  # needed a fix in this campaign
    heavy: bool = False  # starts a process (a moto server)
    s3_user: str = ""  # the guarded S3 endpoint's user whose keys the case runs with (``GuardedS3.keys``;
    # "unknown": a key id it never issued, "wrong-secret": the writer's key id with another secret); heavy


def case(id, command, wrong, argv, says, **kwargs) -> Case:
    return Case(
        id, command, wrong, tuple(shlex.split(argv)), (says,) if isinstance(says, str) else tuple(says), **kwargs
    )


TRAIN = "train {files_config}"
TRANSFER = "transfer {model} --data-dir {transfer_data} --tasks xnli --no-mlflow"
EXTRACT = "static extract --model {model} --corpus {corpus} --out {out}/x.vec"
GUARDED = "storage.endpoint_url={guarded_url}"  # moto enforcing IAM: the rows' keys are checked
S3_CORPUS = "'data.corpora=[{{path: s3://sealed/corpus/, lang: en}}]'"
# storage under a file, a missing constraint file, a corpus glob matching nothing, a model without tokenizer files
FOUR_WRONG = (
    "model.name_or_path={model_no_tokenizer} data.constraints=[{missing}.parquet] "
    "'data.corpora=[{{path: \"{out}/none/*.txt\", lang: en}}]' storage.path={corpus}/runs"
)
FOUR_WRONG_SAYS = [
    "4 problems:",
    "model.name_or_path: {model_no_tokenizer} has no tokenizer files",
    "data.constraints[0]: file not found: {missing}.parquet",
    "data.corpora[0].path: no file matches '{out}/none/*.txt'",
    "storage.path: {corpus}/runs is not writable",
]
ALIGN = "static align --src {en_vec} --tgt {de_vec} --dictionary {dictionary} --out {out}/mapped.vec"

CASES = [
    # ---- train: the config file and its overrides
    case(
        "train-config-missing",
        "train",
        "config file missing",
        "train {missing}.yaml",
        ["config file not found: {missing}.yaml"],
    ),
    case(
        "train-config-not-yaml",
        "train",
        "config file that is not YAML",
        "train {not_yaml}",
        ["{not_yaml}: not valid YAML"],
    ),
    case(
        "train-config-list",
        "train",
        "config whose top level is a list",
        "train {list_yaml}",
        ["{list_yaml}: the top level must be a mapping"],
    ),
    case(
        "train-config-duplicate-key",
        "train",
        "config file giving a key twice",
        "train {duplicate_yaml}",
        ["{duplicate_yaml}:3: run: given twice in one mapping (line 1 too)", "keep the one you mean"],
        fixed=True,
    ),
    case(
        "train-config-case-twins",
        "train",
        "config file with keys differing only in case",
        "train {case_twins_yaml}",
        ["{case_twins_yaml}:3: train.LR: and 'lr' differ only in case or spaces"],
        fixed=True,
    ),
    case(
        "train-config-octal",
        "train",
        "config number with a leading zero (YAML 1.1 octal)",
        "train {octal_yaml}",
        ["{octal_yaml}:2: train.max_steps: 010 has a leading zero", "octal number (8)"],
        fixed=True,
    ),
    case(
        "train-config-empty-value",
        "train",
        "config key given no value",
        "train {empty_value_yaml}",
        ["{empty_value_yaml}:2: train.lr: has no value", "write null to mean none"],
        fixed=True,
    ),
    case(
        "train-config-norwegian",
        "train",
        "language code no (Norwegian) unquoted: YAML reads false",
        "train {norwegian_yaml}",
        [
            "{norwegian_yaml}:4: data.eval_dictionaries[0].lang2: expected a string, got false",
            "write the word in quotes",
        ],
        fixed=True,
    ),
    case(
        "train-override-empty",
        "train",
        "override given no value",
        f"{TRAIN} train.lr=",
        ["override train.lr: has no value", "train.lr=null"],
        fixed=True,
    ),
    case(
        "train-override-base-60",
        "train",
        "override number with colons (YAML 1.1 base 60)",
        f"{TRAIN} train.max_steps=1:30",
        ["override train.max_steps: 1:30 is a base-60 number to YAML 1.1 (90)"],
        fixed=True,
    ),
    case(
        "train-unknown-key",
        "train",
        "override of an unknown key",
        f"{TRAIN} train.learning_rate=1e-3",
        ["unknown key 'train.learning_rate'", "allowed here:", "lr"],
    ),
    case(
        "train-unknown-section",
        "train",
        "override of an unknown section",
        f"{TRAIN} trian.lr=1e-3",
        ["unknown key 'trian'", "allowed here:"],
    ),
    case(
        "train-override-no-equals",
        "train",
        "override without '='",
        f"{TRAIN} train.lr",
        ["override 'train.lr' is not of the form key.sub=value"],
    ),
    case(
        "train-wrong-type-int",
        "train",
        "integer key given a word",
        f"{TRAIN} train.max_steps=many",
        ["train.max_steps: expected an integer, got 'many'"],
    ),
    case(
        "train-wrong-type-float",
        "train",
        "number key given a word",
        f"{TRAIN} train.lr=fast",
        ["train.lr: expected a number, got 'fast'"],
    ),
    case(
        "train-wrong-type-bool",
        "train",
        "true/false key given a word",
        f"{TRAIN} train.use_gpu=yes-please",
        ["train.use_gpu: expected true/false"],
    ),
    case(
        "train-wrong-choice",
        "train",
        "value outside a key's choices",
        f"{TRAIN} train.engine=horovod",
        ["train.engine: 'horovod' is not one of ['ddp', 'deepspeed']"],
    ),
    case(
        "train-section-scalar", "train", "a section given a value", f"{TRAIN} train=fast", ["train: expected a mapping"]
    ),
    case(
        "train-impossible-value",
        "train",
        "impossible value",
        f"{TRAIN} train.max_steps=0",
        ["train.max_steps: must be >= 1"],
    ),
    case(
        "train-unknown-objective",
        "train",
        "unknown objective",
        f"{TRAIN} objectives.infonce.weight=1",
        ["unknown key 'objectives.infonce'", "lexical"],
    ),
    case(
        "train-no-objective",
        "train",
        "every objective weight 0",
        f"{TRAIN} objectives.mlm.weight=0 objectives.lexical.weight=0",
        ["objectives: every objective has weight 0"],
    ),
    case(
        "train-zero-without-deepspeed",
        "train",
        "ZeRO stage without DeepSpeed",
        f"{TRAIN} train.zero_stage=2",
        ["train.zero_stage: ZeRO needs train.engine=deepspeed"],
    ),
    case(
        "train-run-name-slash",
        "train",
        "run name with '/'",
        f"{TRAIN} run.name=a/b",
        ["run.name: must be a non-empty name without '/'"],
    ),
    # ---- train: data files
    case(
        "train-constraints-missing",
        "train",
        "constraint file missing",
        f"{TRAIN} data.constraints=[{{missing}}.parquet]",
        ["data.constraints[0]: file not found: {missing}.parquet"],
    ),
    case(
        "train-constraints-corrupt",
        "train",
        "corrupted constraint parquet",
        f"{TRAIN} data.constraints=[{{corrupt_parquet}}]",
        ["{corrupt_parquet}: unreadable parquet file", "write it again"],
        fixed=True,
    ),
    case(
        "train-constraints-columns",
        "train",
        "constraint parquet with wrong columns",
        f"{TRAIN} data.constraints=[{{wrong_columns_parquet}}]",
        ["{wrong_columns_parquet}: missing constraint columns", "word1"],
    ),
    case(
        "train-constraints-empty",
        "train",
        "constraint parquet with no rows",
        f"{TRAIN} data.constraints=[{{empty_constraints}}]",
        ["{empty_constraints}", "no usable"],
        fixed=True,
    ),
    case(
        "train-constraints-extension",
        "train",
        "constraint file of another format",
        f"{TRAIN} data.constraints=[{{corpus}}]",
        [
            "{corpus}: 0 rows read",
            "expected 7 tab-separated columns",
            "no usable constraint pairs in {corpus}: check its format",
        ],
        fixed=True,
    ),
    case(
        "train-constraints-dictionary",
        "train",
        "a G-BLI dictionary given as constraints",
        f"{TRAIN} data.constraints=[{{gbli_dictionary}}]",
        ["{gbli_dictionary}: a two-column dictionary (src<TAB>tgt, G-BLI/MUSE)", "give it as data.dictionaries"],
        fixed=True,
    ),
    case(
        "train-corpus-missing",
        "train",
        "corpus file missing",
        f"{TRAIN} 'data.corpora=[{{{{path: {{missing}}.txt, lang: en}}}}]'",
        ["data.corpora[0].path: file not found"],
    ),
    case(
        "train-corpus-empty",
        "train",
        "empty corpus file",
        f"{TRAIN} 'data.corpora=[{{{{path: {{empty_txt}}, lang: en}}}}]'",
        ["data.corpora[0].path: {empty_txt} is empty", "give a corpus"],
        fixed=True,
    ),
    case(
        "train-corpus-corrupt",
        "train",
        "corrupted corpus parquet",
        f"{TRAIN} 'data.corpora=[{{{{path: {{corrupt_corpus_parquet}}, lang: en}}}}]'",
        ["{corrupt_corpus_parquet}: unreadable parquet file", "write it again"],
        fixed=True,
    ),
    case(
        "train-corpus-no-text",
        "train",
        "corpus parquet without a text column",
        f"{TRAIN} 'data.corpora=[{{{{path: {{wrong_columns_parquet}}, lang: en}}}}]'",
        ["{wrong_columns_parquet}: no 'text' column"],
    ),
    case(
        "train-corpus-no-lang",
        "train",
        "corpus without its language",
        f"{TRAIN} 'data.corpora=[{{{{path: {{corpus}}}}}}]'",
        ["data.corpora[0].lang: is required"],
    ),
    case(
        "train-dictionary-missing",
        "train",
        "dictionary file missing",
        f"{TRAIN} 'data.eval_dictionaries=[{{{{path: {{missing}}.tsv, lang1: en, lang2: de}}}}]'",
        ["data.eval_dictionaries[0].path: file not found"],
    ),
    case(
        "train-dictionary-columns",
        "train",
        "dictionary with one column a line",
        f"{TRAIN} 'data.eval_dictionaries=[{{{{path: {{one_column_tsv}}, lang1: en, lang2: de}}}}]'",
        ["{one_column_tsv}", "no usable"],
        fixed=True,
    ),
    case(
        "train-dictionary-name-swapped",
        "train",
        "dictionary declared the other way round than its file name",
        f"{TRAIN} 'data.eval_dictionaries=[{{{{path: {{gbli_dictionary}}, lang1: de, lang2: en}}}}]'",
        [
            "{gbli_dictionary}: declared de-en (lang1-lang2), but its name says it is en-de",
            "the other way round",
            "declare lang1: en, lang2: de",
        ],
        fixed=True,
    ),
    case(
        "train-dictionary-name-other-pair",
        "train",
        "dictionary declared for another pair than its file name",
        f"{TRAIN} 'data.dictionaries=[{{{{path: {{gbli_dictionary}}, lang1: en, lang2: fr}}}}]'",
        ["{gbli_dictionary}: declared en-fr (lang1-lang2), but its name says it is en-de"],
        fixed=True,
    ),
    case(
        "train-dictionary-words-swapped",
        "train",
        "dictionary declared the other way round than its words",
        f"{TRAIN} 'data.eval_dictionaries=[{{{{path: {{dictionary}}, lang1: de, lang2: en}}}}]'",
        [
            "{dictionary}: declared de-en, but 100% of the words of column 1 (lang1: de) are words of the en corpus",
            "declared the wrong way round",
        ],
        fixed=True,
    ),
    case(
        "train-dictionary-words-other-language",
        "train",
        "dictionary declared for a language it is not in",
        f"{TRAIN} 'data.corpora=[{{{{path: {{corpus}}, lang: en}}}}, {{{{path: {{de_corpus}}, lang: de}}}}]' "
        "'data.eval_dictionaries=[{{path: {dictionary}, lang1: en, lang2: fr}}]'",
        ["{dictionary}: declared en-fr", "of column 2 (lang2: fr) are words of the de corpus (no fr corpus"],
        fixed=True,
    ),
    case(
        "train-dictionary-script",
        "train",
        "dictionary whose column is in another script than its language's",
        f"{TRAIN} 'data.eval_dictionaries=[{{{{path: {{ru_en_dictionary}}, lang1: en, lang2: ru}}}}]'",
        [
            "{ru_en_dictionary}: declared en-ru",
            "column 1 (lang1: en) are in Cyrillic letters, not Latin",
            "declared the wrong way round",
        ],
        fixed=True,
    ),
    case(
        "train-language-unknown",
        "train",
        "language code in no input",
        f"{TRAIN} eval.test_languages=[fi]",
        ["eval.test_languages: no evaluation dictionary between ['fi']"],
    ),
    case(
        "train-language-not-a-code",
        "train",
        "a language code that is no language",
        f"{TRAIN} eval.test_languages=[qq]",
        ["eval.test_languages[0]: 'qq' is not a language code"],
    ),
    # ---- train: the model
    case(
        "train-model-missing",
        "train",
        "model directory missing",
        f"{TRAIN} model.name_or_path={{missing}}",
        ["model.name_or_path: no such model directory: {missing}"],
    ),
    case(
        "train-model-file",
        "train",
        "model path that is a file",
        f"{TRAIN} model.name_or_path={{model}}/config.json",
        ["model.name_or_path: {model}/config.json is a file, not a model directory", "a model directory holds"],
    ),
    case(
        "train-model-no-config",
        "train",
        "model folder without config.json",
        f"{TRAIN} model.name_or_path={{empty_dir}}",
        ["model.name_or_path: {empty_dir} has no config.json"],
    ),
    case(
        "train-model-checkpoint",
        "train",
        "a distalign checkpoint instead of its model/",
        f"{TRAIN} model.name_or_path={{checkpoint}}",
        ["{checkpoint} has no config.json", "its model/ folder"],
    ),
    case(
        "train-model-weights-corrupt",
        "train",
        "corrupted model.safetensors",
        f"{TRAIN} model.name_or_path={{model_bad_weights}}",
        ["{model_bad_weights}", "model.safetensors"],
        fixed=True,
    ),
    case(
        "train-tokenizer-mismatch",
        "train",
        "a tokenizer that does not match the model",
        f"{TRAIN} model.name_or_path={{model_other_tokenizer}}",
        ["{model_other_tokenizer}", "tokenizer"],
        fixed=True,
    ),
    case(
        "train-tokenizer-missing",
        "train",
        "model folder without tokenizer files",
        f"{TRAIN} model.name_or_path={{model_no_tokenizer}}",
        ["{model_no_tokenizer}", "tokenizer"],
        fixed=True,
    ),
    case(
        "train-model-s3-unreachable",
        "train",
        "S3 model path at an endpoint not answering",
        f"{TRAIN} model.name_or_path=s3://ckpt/models/xlmr storage.endpoint_url=http://127.0.0.1:{{closed_port}}",
        [
            "model.name_or_path: s3://ckpt/models/xlmr (endpoint http://127.0.0.1:{closed_port}): the storage cannot "
            "be read",
            "storage.endpoint_url",
        ],
        fixed=True,
    ),
    case(
        "train-model-s3-absent",
        "train",
        "S3 model path with nothing stored there (moto)",
        f"{TRAIN} model.name_or_path=s3://ckpt/models/absent storage.endpoint_url={{s3_url}}",
        [
            "model.name_or_path: s3://ckpt/models/absent",
            "nothing stored there",
            "distalign model fetch NAME --to s3://ckpt/models/absent",
        ],
        fixed=True,
        heavy=True,
    ),
    # ---- train: a run started again (same run.name) whose checkpoint does not fit the config
    case(
        "train-resume-engine",
        "train",
        "resume of a DDP run with DeepSpeed",
        f"{TRAIN} run.name=old train.engine=deepspeed",
        [
            "train.engine: run.name=old resumes from {checkpoint}, saved by train.engine=ddp",
            "set train.engine=ddp to resume it, or give a new run.name",
        ],
        fixed=True,
    ),
    case(
        "train-resume-adapters",
        "train",
        "resume with adapters of a run trained without",
        f"{TRAIN} run.name=old model.adapters.enabled=true",
        ["model.adapters.enabled: run.name=old resumes from {checkpoint}, which was trained without adapters"],
        fixed=True,
    ),
    case(
        "train-resume-architecture",
        "train",
        "resume with a model of another architecture",
        f"{TRAIN} run.name=old model.name_or_path=tiny",
        [
            "model.name_or_path: run.name=old resumes from {checkpoint}, whose model is another architecture",
            "hidden_size 16 (checkpoint) vs 64",
            "give a new run.name",
        ],
        fixed=True,
    ),
    # ---- check, and train: every problem of a config at once (issue 46)
    case(
        "check-four-wrong-inputs",
        "check",
        "four wrong inputs in one config",
        f"check {{files_config}} {FOUR_WRONG}",
        FOUR_WRONG_SAYS,
        ray="no Ray",
    ),
    case(
        "train-four-wrong-inputs",
        "train",
        "four wrong inputs in one config",
        f"{TRAIN} {FOUR_WRONG}",
        FOUR_WRONG_SAYS,
        fixed=True,
    ),
    case(
        "check-too-few-pairs",
        "check",
        "fewer constraint pairs than one batch per worker",
        "check {files_config} train.constraint_batch_size=16 train.num_workers=2",
        [
            "data.constraints: only 16 constraint pairs left after excluding evaluation words",
            "at least train.constraint_batch_size=16 x train.num_workers=2 = 32",
        ],
        ray="no Ray",
    ),
    case(
        "check-too-many-workers",
        "check",
        "more workers than the machine's CPUs hold",
        "check {files_config} train.num_workers=512",
        ["train.num_workers: 512 workers need", "this machine", "lower train.num_workers"],
        ray="no Ray",
    ),
    # ---- train: tracking and storage
    case(
        "train-mlflow-unreachable",
        "train",
        "MLflow server not answering",
        f"{TRAIN} tracking.uri=http://127.0.0.1:{{closed_port}}",
        ["tracking.uri http://127.0.0.1:{closed_port}: the MLflow tracking server does not answer", "start it"],
        fixed=True,
    ),
    case(
        "train-mlflow-unauthorised",
        "train",
        "MLflow server refusing the credentials",
        f"{TRAIN} tracking.uri={{unauthorised_mlflow}}",
        ["tracking.uri {unauthorised_mlflow}", "refuses the request (HTTP 401)", "set MLFLOW_TRACKING_USERNAME"],
        fixed=True,
    ),
    case(
        "train-storage-file",
        "train",
        "storage.path that is a file",
        f"{TRAIN} storage.path={{corpus}}",
        ["storage.path: {corpus}", "not writable"],
        fixed=True,
    ),
    case(
        "train-storage-under-file",
        "train",
        "storage.path under a file",
        f"{TRAIN} storage.path={{corpus}}/runs",
        ["storage.path: {corpus}/runs", "not writable"],
        fixed=True,
    ),
    case(
        "train-s3-unreachable",
        "train",
        "S3 endpoint not answering",
        f"{TRAIN} storage.path=s3://ckpt/runs storage.endpoint_url=http://127.0.0.1:{{closed_port}}",
        [
            "storage.path s3://ckpt/runs (endpoint http://127.0.0.1:{closed_port}): the storage cannot be reached",
            "check storage.endpoint_url",
        ],
        fixed=True,
    ),
    case(
        "train-s3-no-bucket",
        "train",
        "S3 bucket that does not exist (moto)",
        f"{TRAIN} storage.path=s3://no-such-bucket/runs storage.endpoint_url={{s3_url}}",
        ["storage.path s3://no-such-bucket/runs", "bucket 'no-such-bucket' does not exist"],
        fixed=True,
        heavy=True,
    ),
    # ---- train: S3 credentials that are wrong or lack a permission (moto enforcing IAM)
    case(
        "train-s3-storage-unknown-key",
        "train",
        "S3 access key the endpoint does not know",
        f"{TRAIN} storage.path=s3://guarded/runs {GUARDED}",
        [
            "storage.path s3://guarded/runs",
            "S3 refuses access key {access_key}",
            "check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY",
        ],
        s3_user="unknown",
    ),
    case(
        "train-s3-storage-wrong-secret",
        "train",
        "S3 secret key that does not match the key id",
        f"{TRAIN} storage.path=s3://guarded/runs {GUARDED}",
        [
            "storage.path s3://guarded/runs",
            "S3 refuses access key {access_key}",
            "check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY",
        ],
        s3_user="wrong-secret",
    ),
    case(
        "train-s3-storage-no-permission",
        "train",
        "S3 key without a permission on the bucket",
        f"{TRAIN} storage.path=s3://guarded/runs {GUARDED}",
        ["storage.path s3://guarded/runs", "S3 refuses access key {access_key}", "the bucket policy"],
        s3_user="stranger",
        fixed=True,
    ),
    case(
        "train-s3-storage-read-only",
        "train",
        "S3 key that may read the bucket but not write",
        f"{TRAIN} storage.path=s3://guarded/runs {GUARDED}",
        [
            "storage.path s3://guarded/runs",
            "S3 refuses access key {access_key}",
            "write and delete objects under this path",
        ],
        s3_user="reader",
        fixed=True,
    ),
    case(
        "train-s3-corpus-no-permission",
        "train",
        "S3 corpus in a bucket the key may not read",
        f"{TRAIN} storage.path=s3://guarded/runs {GUARDED} {S3_CORPUS}",
        ["data.corpora[0].path s3://sealed/corpus/", "S3 refuses access key {access_key}", "the bucket policy"],
        s3_user="writer",
        fixed=True,
    ),
    case(
        "train-corpora-local-and-s3",
        "train",
        "local corpora beside an S3 validation corpus",
        f"{TRAIN} storage.path=s3://guarded/runs {GUARDED} "
        "'data.validation_corpora=[{{path: s3://guarded/corpus/en.txt, lang: en}}]'",
        [
            "data.corpora[0].path",
            "is a local path and data.validation_corpora[0].path s3://guarded/corpus/en.txt is not",
            "all on S3 or all on local",
        ],
        s3_user="writer",
        fixed=True,
    ),
    case(
        "train-s3-validation-no-permission",
        "train",
        "S3 validation corpus in a bucket the key may not read",
        f"{TRAIN} storage.path=s3://guarded/runs {GUARDED} "
        "'data.corpora=[{{path: s3://guarded/corpus/, lang: en}}]' "  # one filesystem for the corpora: S3 both
        "'data.validation_corpora=[{{path: s3://sealed/corpus/en.txt, lang: en}}]'",
        [
            "data.validation_corpora[0].path s3://sealed/corpus/en.txt",
            "S3 refuses access key {access_key}",
            "the bucket policy",
        ],
        s3_user="writer",
        fixed=True,
    ),
    case(
        "tune-s3-storage-read-only",
        "tune",
        "S3 key that may read the study's storage but not write",
        "tune {study} storage.path=s3://guarded/runs " + GUARDED,
        [
            "storage.path s3://guarded/runs",
            "S3 refuses access key {access_key}",
            "write and delete objects under this path",
        ],
        s3_user="reader",
        fixed=True,
    ),
    # ---- train through jobs/train.py (ray job submit)
    case(
        "job-train-no-config",
        "jobs/train.py",
        "--config left out",
        "job:train.py",
        ["the following arguments are required: --config"],
    ),
    case(
        "job-tune-study-missing",
        "jobs/tune.py",
        "study file missing",
        "job:tune.py {missing}.yaml",
        ["config file not found: {missing}.yaml"],
    ),
    case(
        "job-evaluate-model-missing",
        "jobs/evaluate.py",
        "--model directory missing",
        "job:evaluate.py --model {missing} --no-mlflow",
        ["--model {missing}: directory not found"],
    ),
    # ---- tune
    case(
        "tune-study-missing",
        "tune",
        "study file missing",
        "tune {missing}.yaml",
        ["config file not found: {missing}.yaml"],
    ),
    case(
        "tune-unknown-key",
        "tune",
        "unknown study key",
        "tune {study} grids.train.lr=[1e-3]",
        ["unknown key 'grids' in override", "neither a study key", "grid"],
        fixed=True,
    ),
    case(
        "tune-grid-not-list",
        "tune",
        "grid values not a list",
        "tune {study} grid.train.lr=1e-3",
        ["grid.train.lr", "expected a list"],
    ),
    case(
        "tune-grid-bad-trial-key",
        "tune",
        "grid over a key no trial has",
        "tune {study} grid.train.learning_rate=[1]",
        ["unknown key 'train.learning_rate'", "allowed here:"],
    ),
    case(
        "tune-base-missing",
        "tune",
        "study whose base config is missing",
        "tune {study_missing_base}",
        ["base: experiment config not found: {missing}.yaml"],
    ),
    case(
        "tune-trial-override-type",
        "tune",
        "trial override of a wrong type",
        "tune {study} train.max_steps=lots",
        ["train.max_steps: expected an integer, got 'lots'"],
    ),
    # ---- eval
    case(
        "eval-no-model",
        "eval",
        "neither --checkpoint nor --model",
        "eval --no-mlflow",
        ["give exactly one (--checkpoint or --model)"],
    ),
    case(
        "eval-model-missing",
        "eval",
        "--model directory missing",
        "eval --model {missing} --no-mlflow",
        ["--model {missing}: directory not found"],
    ),
    case(
        "eval-model-file",
        "eval",
        "--model that is a file",
        "eval --model {model}/config.json --no-mlflow",
        ["{model}/config.json is a file, not a model directory"],
    ),
    case(
        "eval-checkpoint-not-one",
        "eval",
        "--checkpoint that is not a checkpoint",
        "eval --checkpoint {empty_dir} --no-mlflow",
        ["--checkpoint {empty_dir}: not a distalign checkpoint"],
    ),
    case(
        "eval-checkpoint-weights-corrupt",
        "eval",
        "checkpoint whose model.safetensors is corrupted",
        "eval --checkpoint {checkpoint_bad_weights} --no-mlflow",
        [
            "--checkpoint {checkpoint_bad_weights}: {checkpoint_bad_weights}/model/model.safetensors: not a readable "
            "safetensors file",
            "copy the model again",
        ],
        fixed=True,
    ),
    case(
        "eval-unknown-task",
        "eval",
        "unknown task",
        "eval --model {model} --tasks blii --no-mlflow",
        ["suite.tasks[0]: 'blii' is not one of"],
    ),
    case(
        "eval-eval-dir-missing",
        "eval",
        "benchmark folder missing",
        "eval --model {model} --tasks bli --eval-dir {missing} --no-mlflow",
        ["suite.eval_dir (--eval-dir): directory not found: {missing}"],
    ),
    case(
        "eval-benchmark-not-fetched",
        "eval",
        "benchmark not in the benchmark folder (not fetched)",
        "eval --model {model} --tasks tatoeba --eval-dir {empty_dir} --no-mlflow",
        [
            "suite.tatoeba_langs (--tatoeba-langs): the Tatoeba folder {empty_dir}/tatoeba not found",
            "`distalign data fetch tatoeba`",
        ],
        fixed=True,
    ),
    case(
        "data-fetch-unknown-name",
        "data",
        "unknown resource name",
        "data fetch tatoeba gbli",
        ["no benchmark resource 'gbli'; choose from g-bli"],
        ray="no Ray",
    ),
    case(
        "data-fetch-unknown-part",
        "data",
        "a part the resource lacks",
        "data fetch g-bli:de-ja",
        ["g-bli: no part de-ja", "it has: de-fi"],
        ray="no Ray",
    ),
    case(
        "data-fetch-transfer-no-languages",
        "data",
        "a transfer task without its languages",
        "data fetch udpos",
        ["udpos: name its languages, e.g. `distalign data fetch udpos:en,de`"],
        ray="no Ray",
    ),
    case(
        "data-fetch-semeval17",
        "data",
        "a resource fetched by hand (SemEval-17)",
        "data fetch semeval17",
        ["https://alt.qcri.org/semeval2017/task2/", "eval/semeval2017/subtask2-crosslingual/"],
        ray="no Ray",
    ),
    case(
        "eval-unknown-language",
        "eval",
        "unknown language pair",
        "eval --model {model} --tasks bli --eval-dir {eval_dir} --bli-pairs en-qq --no-mlflow",
        ["suite.bli_pairs (--bli-pairs): 'qq' is not a language code"],
    ),
    case(
        "eval-unknown-language-before-model",
        "eval",
        "language pair that is no pair, with a missing model",
        "eval --model {missing} --tasks bli --bli-pairs en-qq --no-mlflow",
        ["suite.bli_pairs (--bli-pairs): 'qq' is not a language code"],
        fixed=True,
    ),
    case(
        "eval-dictionary-language-before-model",
        "eval",
        "--dictionary language that is no language, with a missing model",
        "eval --model {missing} --dictionary qq-de:{dictionary} --no-mlflow",
        ["suite.dictionaries[0] (--dictionary): 'qq' is not a language code"],
        fixed=True,
    ),
    case(
        "eval-dictionary-name-swapped",
        "eval",
        "--dictionary declared the other way round than its file name",
        "eval --model {model} --dictionary de-en:{gbli_dictionary} --no-mlflow",
        ["{gbli_dictionary}: declared de-en (lang1-lang2), but its name says it is en-de", "the other way round"],
        fixed=True,
    ),
    case(
        "eval-dictionary-malformed",
        "eval",
        "--dictionary without L1-L2:",
        "eval --model {model} --tasks bli --dictionary {dictionary} --no-mlflow",
        ["--dictionary", "expected L1-L2:PATH"],
    ),
    case(
        "eval-dictionary-nothing-scored",
        "eval",
        "--dictionary none of whose translations is in the vocabulary",
        "eval --model {model} --dictionary en-de:{dictionary} --dictionary-vocab-dir {other_vocab_dir} --no-mlflow",
        [
            "suite.dictionaries[0] (--dictionary) {dictionary}: none of its 4 test pairs has a translation among the "
            "2 target words of de",
            "nothing to score",
        ],
        fixed=True,
    ),
    case(
        "eval-override-unknown",
        "eval",
        "unknown spec override",
        "eval --model {model} --no-mlflow suite.max_query=3",
        ["unknown key 'suite.max_query'"],
    ),
    case(
        "eval-spec-missing",
        "eval",
        "--spec file missing",
        "eval --spec {missing}.yaml",
        ["config file not found: {missing}.yaml"],
    ),
    case(
        "eval-mlflow-unreachable",
        "eval",
        "MLflow server not answering",
        "eval --model {model} --tasks bli --dictionary en-de:{dictionary} "
        "--tracking-uri http://127.0.0.1:{closed_port}",
        ["tracking.uri http://127.0.0.1:{closed_port}: the MLflow tracking server does not answer", "start it"],
        fixed=True,
    ),
    case(
        "eval-tokenizer-mismatch",
        "eval",
        "a tokenizer that does not match the model",
        "eval --model {model_other_tokenizer} --tasks bli --dictionary en-de:{dictionary} --no-mlflow",
        ["{model_other_tokenizer}", "tokenizer"],
        fixed=True,
    ),
    # ---- transfer
    case(
        "transfer-model-missing",
        "transfer",
        "model directory missing",
        "transfer {missing} --data-dir {transfer_data} --tasks xnli --no-mlflow",
        ["--model {missing}: directory not found"],
    ),
    case(
        "transfer-model-file",
        "transfer",
        "model path that is a file",
        "transfer {model}/config.json --data-dir {transfer_data} --tasks xnli --no-mlflow",
        ["--model: {model}/config.json is a file, not a model directory", "a model directory holds config.json"],
    ),
    case(
        "transfer-model-no-config",
        "transfer",
        "model folder without config.json",
        "transfer {empty_dir} --data-dir {transfer_data} --tasks xnli --no-mlflow",
        ["{empty_dir} has no config.json"],
    ),
    case(
        "transfer-unknown-task",
        "transfer",
        "unknown task",
        "transfer {model} --data-dir {transfer_data} --tasks xnlii --no-mlflow",
        ["'xnlii' is not one of"],
    ),
    case(
        "transfer-data-dir-missing",
        "transfer",
        "--data-dir missing",
        "transfer {model} --data-dir {missing} --tasks xnli --no-mlflow",
        ["data_dir: {missing} is not a folder", "give --data-dir the folder of <task>/<lang>/"],
        fixed=True,
    ),
    case(
        "transfer-no-data",
        "transfer",
        "no --data-dir, no --hub, nothing fetched into the data home",
        "transfer {model} --tasks xnli --no-mlflow",
        ["data_dir: give --data-dir, or --hub", "`distalign data fetch xnli:en,LANG`"],
    ),
    case(
        "transfer-unknown-source",
        "transfer",
        "source language without data",
        f"{TRANSFER} --source fi",
        ["xnli: no train data for language fi"],
    ),
    case(
        "transfer-source-not-a-code",
        "transfer",
        "a source language code that is no language",
        f"{TRANSFER} --source qq",
        ["'qq' is not a language code"],
    ),
    case(
        "transfer-arrow-corrupt",
        "transfer",
        "corrupted arrow file",
        "transfer {model} --data-dir {transfer_corrupt} --tasks xnli --no-mlflow",
        [
            "{transfer_corrupt}/xnli/en: datasets cannot load this save_to_disk folder",
            "cut short or corrupted: save it again",
        ],
        fixed=True,
    ),
    case(
        "transfer-labels-out-of-range",
        "transfer",
        "labels out of range",
        "transfer {model} --data-dir {transfer_bad_labels} --tasks xnli --no-mlflow",
        ["xnli: no usable examples", "label 7 is not one of [0, 1, 2]"],
    ),
    case(
        "transfer-wrong-schema",
        "transfer",
        "data set with another task's columns",
        "transfer {model} --data-dir {transfer_wrong_schema} --tasks xnli --no-mlflow",
        ["{transfer_wrong_schema}/xnli/en[train]: no column(s) ['premise', 'hypothesis']"],
    ),
    case(
        "transfer-weights-corrupt",
        "transfer",
        "corrupted model.safetensors",
        "transfer {model_bad_weights} --data-dir {transfer_data} --tasks xnli --no-mlflow",
        ["{model_bad_weights}", "model.safetensors"],
        fixed=True,
    ),
    case(
        "transfer-mlflow-unreachable",
        "transfer",
        "MLflow server not answering",
        "transfer {model} --data-dir {transfer_data} --tasks xnli --tracking-uri http://127.0.0.1:{closed_port}",
        ["tracking.uri http://127.0.0.1:{closed_port}: the MLflow tracking server does not answer", "start it"],
        fixed=True,
    ),
    # ---- static extract / align / bli
    case(
        "extract-model-missing",
        "static extract",
        "teacher model missing",
        "static extract --model {missing} --corpus {corpus} --out {out}/x.vec",
        ["--model: no such model directory: {missing}"],
        ray="no Ray",
        fixed=True,
    ),
    case(
        "extract-corpus-missing",
        "static extract",
        "corpus file missing",
        "static extract --model {model} --corpus {missing}.txt --out {out}/x.vec",
        ["file not found: {missing}.txt"],
        ray="no Ray",
    ),
    case(
        "extract-corpus-empty",
        "static extract",
        "empty corpus",
        "static extract --model {model} --corpus {empty_txt} --out {out}/x.vec",
        ["{empty_txt}: no sentences", "give a corpus"],
        ray="no Ray",
        fixed=True,
    ),
    case(
        "extract-no-words",
        "static extract",
        "corpus with no word as frequent as --min-count",
        f"{EXTRACT} --layer 1 --min-count 1000",
        ["gives 0 words seen at least min_count=1000 times (--min-count)", "no vectors were written"],
        ray="no Ray",
        fixed=True,
    ),
    case(
        "extract-layer-out-of-range",
        "static extract",
        "layer the model does not have",
        f"{EXTRACT} --layer 9",
        ["layer 9 is outside [-2, 1]", "give one in that range"],
        ray="no Ray",
        fixed=True,
    ),
    case(
        "extract-out-not-writable",
        "static extract",
        "--out under a file",
        "static extract --model {model} --corpus {corpus} --out {corpus}/x.vec",
        ["--out: {corpus} is not writable ({corpus} is a file)"],
        ray="no Ray",
        fixed=True,
    ),
    case(
        "align-src-missing",
        "static align",
        "source vectors missing",
        "static align --src {missing}.vec --tgt {de_vec} --dictionary {dictionary} --out {out}/m.vec",
        ["file not found: {missing}.vec"],
        ray="no Ray",
    ),
    case(
        "align-vec-bad-header",
        "static align",
        "vectors without a word2vec header",
        "static align --src {bad_vec} --tgt {de_vec} --dictionary {dictionary} --out {out}/m.vec",
        ["{bad_vec}:1: expected a word2vec header"],
        ray="no Ray",
    ),
    case(
        "align-dictionary-missing",
        "static align",
        "seed dictionary missing",
        "static align --src {en_vec} --tgt {de_vec} --dictionary {missing}.tsv --out {out}/m.vec",
        ["file not found: {missing}.tsv"],
        ray="no Ray",
    ),
    case(
        "align-dictionary-no-overlap",
        "static align",
        "seed dictionary of other words",
        "static align --src {en_vec} --tgt {de_vec} --dictionary {other_dictionary} --out {out}/m.vec",
        [
            "{other_dictionary}: none of its 2 pairs has a vector on both sides",
            "give a seed dictionary of these two languages",
        ],
        ray="no Ray",
        fixed=True,
    ),
    case(
        "align-vecmap-no-tgt-out",
        "static align",
        "vecmap without --tgt-out",
        f"{ALIGN} --method vecmap",
        ["method 'vecmap' moves the target space too", "(--tgt-out)"],
        ray="no Ray",
        fixed=True,
    ),
    case(
        "bli-vectors-malformed",
        "static bli",
        "--vectors without LANG=",
        "static bli --vectors {en_vec}",
        ["--vectors", "expected LANG=PATH"],
        ray="no Ray",
    ),
    case(
        "bli-vectors-missing",
        "static bli",
        "vectors file missing",
        "static bli --vectors en={missing}.vec --vectors de={de_vec} --dictionary en-de:{dictionary}",
        ["file not found: {missing}.vec"],
        ray="no Ray",
    ),
    case(
        "bli-language-unknown",
        "static bli",
        "dictionary language without vectors",
        "static bli --vectors en={en_vec} --vectors de={de_vec} --dictionary en-fi:{dictionary}",
        ["--vectors: no vectors for 'fi' (pair en-fi); give --vectors fi=PATH"],
        ray="no Ray",
    ),
    case(
        "bli-nothing-scored",
        "static bli",
        "dictionary none of whose words have vectors",
        "static bli --vectors en={en_vec} --vectors de={de_vec} --dictionary en-de:{other_dictionary} "
        "--output {out}/none.csv",
        ["en-de: none of its 2 test pairs has its source word in --vectors en={en_vec}", "nothing to score"],
        ray="no Ray",
        fixed=True,
    ),
    # ---- mine-constraints
    case(
        "mine-source-missing",
        "mine-constraints",
        "source missing",
        "mine-constraints {missing} --languages fr,it --out {out}/c.parquet",
        ["{missing}: not found", "give the folder of OMW wn-data-<lang>.tab files"],
        ray="no Ray",
        fixed=True,
    ),
    case(
        "mine-unknown-language",
        "mine-constraints",
        "a language without an OMW file",
        "mine-constraints {omw} --languages fr,German --out {out}/c.parquet",
        ["no OMW file for language 'de'", "(has ['fr', 'it'])"],
        ray="no Ray",
    ),
    case(
        "mine-exclude-missing",
        "mine-constraints",
        "--exclude file missing",
        "mine-constraints {omw} --languages fr,it --exclude {missing}.fr-it.tsv --out {out}/c.parquet",
        ["file not found: {missing}.fr-it.tsv"],
        ray="no Ray",
    ),
    case(
        "mine-exclude-name",
        "mine-constraints",
        "--exclude file whose name does not give its pair",
        "mine-constraints {omw} --languages fr,it --exclude {dictionary} --out {out}/c.parquet",
        ["{dictionary}: evaluation file name must end in '<l1>-<l2>.tsv'"],
        ray="no Ray",
    ),
    case(
        "mine-nothing-mined",
        "mine-constraints",
        "source with no synset shared by the languages",
        "mine-constraints {omw_unshared} --languages fr,it --out {out}/none.parquet",
        ["0 constraint pairs mined from", "nothing written to {out}/none.parquet"],
        ray="no Ray",
        fixed=True,
    ),
    case(
        "mine-out-not-writable",
        "mine-constraints",
        "--out under a file",
        "mine-constraints {omw} --languages fr,it --out {corpus}/c.parquet",
        ["--out: {corpus} is not writable ({corpus} is a file)"],
        ray="no Ray",
        fixed=True,
    ),
    case(
        "mine-stopwords-missing",
        "mine-constraints",
        "--stopwords file missing",
        "mine-constraints {omw} --languages fr,it --stopwords {missing}.txt --out {out}/c.parquet",
        ["--stopwords {missing}.txt: No such file or directory", "or leave --stopwords out"],
        ray="no Ray",
        fixed=True,
    ),
    # ---- language codes given on flags (any code or name of a language; #38 item 12)
    case(
        "eval-tatoeba-language-missing",
        "eval",
        "--tatoeba-langs language the Tatoeba folder lacks",
        "eval --model {model} --tasks tatoeba --eval-dir {eval_dir} --tatoeba-langs German --no-mlflow",
        ["suite.tatoeba_langs (--tatoeba-langs): no data for 'German' (language de, ISO 639-3 deu)", "holds: fra"],
        fixed=True,
    ),
    case(
        "eval-tatoeba-not-a-language",
        "eval",
        "--tatoeba-langs code that is no language",
        "eval --model {model} --tasks tatoeba --eval-dir {eval_dir} --tatoeba-langs Frnch --no-mlflow",
        ["suite.tatoeba_langs (--tatoeba-langs): 'Frnch' is not a language code"],
        fixed=True,
    ),
    case(
        "eval-tatoeba-language-before-model",
        "eval",
        "--tatoeba-langs code that is no language, with a missing model",
        "eval --model {missing} --tasks tatoeba --tatoeba-langs Frnch --no-mlflow",
        ["suite.tatoeba_langs (--tatoeba-langs): 'Frnch' is not a language code"],
        fixed=True,
    ),
    case(
        "eval-xlsim-language-before-model",
        "eval",
        "--xlsim-pairs code that is no language, with a missing model",
        "eval --model {missing} --tasks xlsim --xlsim-pairs eng-Frnch --no-mlflow",
        ["suite.xlsim_pairs (--xlsim-pairs): 'Frnch' is not a language code"],
        fixed=True,
    ),
    case(
        "eval-xlsim-language-missing",
        "eval",
        "--xlsim-pairs language the Multi-SimLex folder lacks",
        "eval --model {model} --tasks xlsim --eval-dir {eval_dir} --xlsim-pairs en-de --no-mlflow",
        ["suite.xlsim_pairs (--xlsim-pairs): no data for 'de'", "holds: eng, fra"],
        fixed=True,
    ),
    case(
        "mine-language-not-a-code",
        "mine-constraints",
        "--languages code that is no language",
        "mine-constraints {omw} --languages fr,qq --out {out}/c.parquet",
        ["languages (--languages): 'qq' is not a language code"],
        ray="no Ray",
        fixed=True,
    ),
    case(
        "bench-synthetic-syntax-target-name",
        "bench synthetic",
        "--syntax-target that is no language",
        "bench synthetic --world 20 --transformations translit_syn --syntax-target Frnch --output-dir {out}/bs",
        ["syntax_target (--syntax-target): language 'Frnch': 'Frnch' is not a language code"],
        fixed=True,
    ),
    case(
        "bench-synthetic-syntax-treebank",
        "bench synthetic",
        "--syntax-target treebank missing",
        "bench synthetic --world 20 --transformations translit_syn --syntax-target {missing}.conllu "
        "--output-dir {out}/bs",
        ["syntax_target (--syntax-target): file not found: {missing}.conllu"],
        fixed=True,
    ),
    # ---- bench
    case(
        "bench-synthetic-corpus-missing",
        "bench synthetic",
        "base corpus missing",
        "bench synthetic --corpus {missing}.txt --output-dir {out}/bs",
        ["--corpus: file not found: {missing}.txt"],
    ),
    case(
        "bench-synthetic-transformation",
        "bench synthetic",
        "unknown transformation",
        "bench synthetic --transformations translit,rot13 --output-dir {out}/bs",
        ["unknown objective set or transformation: ['rot13']", "transformations: translit"],
    ),
    case(
        "bench-synthetic-objectives",
        "bench synthetic",
        "unknown objective set",
        "bench synthetic --objectives mlm,infonce --output-dir {out}/bs",
        ["unknown objective set or transformation: ['infonce']", "objectives: mlm, align"],
    ),
    case(
        "bench-synthetic-override",
        "bench synthetic",
        "unknown training override",
        "bench synthetic --output-dir {out}/bs train.learning_rate=1",
        ["unknown key 'train.learning_rate'", "allowed here:"],
    ),
    case(
        "bench-synthetic-preset",
        "bench synthetic",
        "unknown preset",
        "bench synthetic --preset paper-shap",
        ["--preset paper-shap: no such preset (paper-shape, paper-shape-transfer)"],
    ),
    case(
        "bench-synthetic-syntax-target",
        "bench synthetic",
        "unknown --syntax-target language",
        "bench synthetic --corpus {conllu} --transformations translit_syn --syntax-target qqq --output-dir {out}/bs",
        ["language 'qqq': URIEL (lang2vec) has no syntax_knn vector", "give an ISO 639-1 or 639-3 code"],
        fixed=True,
    ),
    case(
        "bench-synthetic-output",
        "bench synthetic",
        "--output-dir under a file",
        "bench synthetic --output-dir {corpus}/bs",
        ["--output-dir: {corpus}/bs is not writable ({corpus} is a file)"],
        fixed=True,
    ),
    case(
        "bench-streaming-output",
        "bench streaming",
        "--output-dir under a file",
        "bench streaming --parts train --output-dir {corpus}/st",
        ["--output-dir: {corpus}/st is not writable ({corpus} is a file)"],
        fixed=True,
    ),
    case(
        "bench-streaming-config",
        "bench streaming",
        "--config missing",
        "bench streaming --parts train --config {missing}.yaml --output-dir {out}/st",
        ["config file not found: {missing}.yaml"],
    ),
    case(
        "bench-streaming-sizes",
        "bench streaming",
        "--sizes-mb not numbers",
        "bench streaming --parts train --sizes-mb big --output-dir {out}/st",
        ["argument --sizes-mb: 'big' is not a comma-separated list of numbers"],
        fixed=True,
    ),
    case(
        "bench-perf-output",
        "bench perf",
        "--output-dir under a file",
        "bench perf --rows step --no-mlflow --output-dir {corpus}/perf",
        ["--output-dir: {corpus}/perf is not writable ({corpus} is a file)"],
        fixed=True,
    ),
    case(
        "bench-perf-rows",
        "bench perf",
        "unknown --rows area",
        "bench perf --rows step,speed --no-mlflow --output-dir {out}/perf",
        ["--rows: unknown speed (choose from step"],
    ),
]


# ---------------------------------------------------------------------------------------------------------------
# the inputs, built once per module


def write_parquet(path: Path, columns: dict) -> str:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table(columns), path)
    return str(path)


def build_inputs(root: Path) -> dict[str, str]:
    from transfer_data import rows, save_task, tiny_model

    from distalign.data.constraint_schema import CONSTRAINT_SCHEMA
    from distalign.models.loading import TinyModelConfig, build_tiny_model

    inputs: dict[str, str] = {
        "missing": str(root / "missing"),
        "out": str(root / "out"),
        "closed_port": str(free_port()),
    }
    (root / "out").mkdir()
    model = tiny_model(root / "model")
    inputs["model"] = str(model)
    (root / "empty_dir").mkdir()
    inputs["empty_dir"] = str(root / "empty_dir")

    bad_weights = shutil.copytree(model, root / "model_bad_weights")
    (bad_weights / "model.safetensors").write_bytes(b"\x00\x01not safetensors" * 10)
    inputs["model_bad_weights"] = str(bad_weights)
    no_tokenizer = shutil.copytree(model, root / "model_no_tokenizer")
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        (no_tokenizer / name).unlink(missing_ok=True)
    inputs["model_no_tokenizer"] = str(no_tokenizer)
    words = [f"w{i}x{j}" for i in range(60) for j in range(5)]
    other = build_tiny_model(
        root / "model_big_vocab",
        [" ".join(words[i : i + 9]) for i in range(len(words))],
        TinyModelConfig(vocab_size=400, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32, max_length=64),
    )
    mismatched = shutil.copytree(model, root / "model_other_tokenizer")
    shutil.copy(other / "tokenizer.json", mismatched / "tokenizer.json")
    inputs["model_other_tokenizer"] = str(mismatched)
    checkpoint = root / "runs" / "old" / "checkpoint_000001"
    shutil.copytree(model, checkpoint / "model")
    (checkpoint / "trainer_state.json").write_text(json.dumps({"step": 1, "mlflow_run_id": ""}))
    (checkpoint / "optimizer.pt").write_bytes(b"")  # a DDP run's
    inputs["checkpoint"] = str(checkpoint)
    bad_checkpoint = root / "runs" / "broken" / "checkpoint_000001"
    shutil.copytree(bad_weights, bad_checkpoint / "model")
    (bad_checkpoint / "trainer_state.json").write_text(json.dumps({"step": 1, "mlflow_run_id": ""}))
    inputs["checkpoint_bad_weights"] = str(bad_checkpoint)

    pairs = [
        ("peter", "en", "peter", "de"),
        ("visits", "en", "besucht", "de"),
        ("berlin", "en", "berlin", "de"),
        ("maria", "en", "maria", "de"),
    ] * 4  # none of them an evaluation word
    constraints = {name: [row[i] for row in pairs] for i, name in enumerate(("word1", "lang1", "word2", "lang2"))}
    constraints |= {
        "synset_id": [f"s{i % 4}" for i in range(len(pairs))],
        "gloss1": [""] * len(pairs),
        "gloss2": [""] * len(pairs),
    }
    inputs["constraints"] = write_parquet(root / "constraints.parquet", constraints)
    import pyarrow.parquet as pq

    pq.write_table(CONSTRAINT_SCHEMA.empty_table(), root / "empty_constraints.parquet")
    inputs["empty_constraints"] = str(root / "empty_constraints.parquet")
    inputs["wrong_columns_parquet"] = write_parquet(root / "wrong_columns.parquet", {"a": ["x"], "b": ["y"]})
    for name in ("corrupt_parquet", "corrupt_corpus_parquet"):
        (root / f"{name}.parquet").write_bytes(b"PAR1 this is not parquet " * 20)
        inputs[name] = str(root / f"{name}.parquet")
    sentences = ["anna sees rome", "peter likes paris", "maria visits berlin"] * 20
    (root / "corpus.txt").write_text("\n".join(sentences) + "\n")
    inputs["corpus"] = str(root / "corpus.txt")
    (root / "empty.txt").write_text("")
    inputs["empty_txt"] = str(root / "empty.txt")
    (root / "dictionary.tsv").write_text("anna\tanna\nsees\tsieht\nlikes\tmag\nrome\trom\n")
    inputs["dictionary"] = str(root / "dictionary.tsv")
    (root / "other_dictionary.tsv").write_text("zebra\tzebra\nmoon\tmond\n")
    inputs["other_dictionary"] = str(root / "other_dictionary.tsv")
    (root / "one_column.tsv").write_text("anna\nsees\nlikes\n")
    inputs["one_column_tsv"] = str(root / "one_column.tsv")
    yaml_files = {
        "duplicate_yaml": "run:\n  name: a\nrun:\n  name: b\n",
        "case_twins_yaml": "train:\n  lr: 0.001\n  LR: 0.01\n",
        "octal_yaml": "train:\n  max_steps: 010\n",
        "empty_value_yaml": "train:\n  lr:\n",
        "norwegian_yaml": f"data:\n  source: files\n  eval_dictionaries:\n"
        f"    - {{path: {root / 'dictionary.tsv'}, lang1: en, lang2: no}}\n",
    }
    for name, text in yaml_files.items():
        (root / f"{name}.yaml").write_text(text)
        inputs[name] = str(root / f"{name}.yaml")
    gbli = root / "yacle.test.freq.2k.en-de.tsv"  # a G-BLI test file: its name gives its pair
    gbli.write_text("anna\tanna\nsees\tsieht\nlikes\tmag\nrome\trom\n")
    inputs["gbli_dictionary"] = str(gbli)
    (root / "other_vocab").mkdir()
    (root / "other_vocab" / "de_vocab.txt").write_text("katze\nhund\n")  # none of the dictionary's targets
    inputs["other_vocab_dir"] = str(root / "other_vocab")
    (root / "ru_en.tsv").write_text("дом\thouse\nкот\tcat\nсобака\tdog\n")
    inputs["ru_en_dictionary"] = str(root / "ru_en.tsv")
    (root / "de_corpus.txt").write_text("anna sieht rom\npeter mag paris\nmaria besucht berlin\n" * 20)
    inputs["de_corpus"] = str(root / "de_corpus.txt")
    (root / "not_yaml.yaml").write_text("run: {name: [unclosed\n")
    inputs["not_yaml"] = str(root / "not_yaml.yaml")
    (root / "list.yaml").write_text("- train\n- eval\n")
    inputs["list_yaml"] = str(root / "list.yaml")

    config = {
        "run": {"name": "bad-inputs"},
        "model": {"name_or_path": str(model)},
        "data": {
            "source": "files",
            "constraints": [inputs["constraints"]],
            "corpora": [{"path": inputs["corpus"], "lang": "en"}],
            "eval_dictionaries": [{"path": inputs["dictionary"], "lang1": "en", "lang2": "de"}],
            "max_seq_length": 32,
        },
        "objectives": {"mlm": {"weight": 1.0}, "lexical": {"weight": 1.0}},
        "train": {"num_workers": 1, "max_steps": 2, "constraint_batch_size": 4, "corpus_batch_size": 4},
        "storage": {"path": str(root / "runs")},
    }
    (root / "files.yaml").write_text(json.dumps(config))  # JSON is YAML
    inputs["files_config"] = str(root / "files.yaml")
    study = {"study": "bad-inputs", "base": inputs["files_config"], "grid": {"train.lr": [1e-3, 3e-4]}}
    (root / "study.yaml").write_text(json.dumps(study))
    inputs["study"] = str(root / "study.yaml")
    (root / "study_missing_base.yaml").write_text(json.dumps(study | {"base": inputs["missing"] + ".yaml"}))
    inputs["study_missing_base"] = str(root / "study_missing_base.yaml")

    data = root / "transfer"
    for lang in ("en", "de"):
        save_task(data, "xnli", lang, sizes=(16, 8, 8))
    inputs["transfer_data"] = str(data)
    corrupt = shutil.copytree(data, root / "transfer_corrupt")
    for arrow in (corrupt / "xnli" / "en" / "train").glob("*.arrow"):
        arrow.write_bytes(b"not arrow" * 50)
    inputs["transfer_corrupt"] = str(corrupt)
    from datasets import Dataset, DatasetDict, Features, Value

    bad_labels = root / "transfer_bad_labels"
    shutil.copytree(data / "xnli" / "de", bad_labels / "xnli" / "de")
    values = rows("xnli", "en", 16, 0)
    values["label"] = [7] * 16
    features = Features({"premise": Value("string"), "hypothesis": Value("string"), "label": Value("int64")})
    DatasetDict(
        {split: Dataset.from_dict(values, features=features) for split in ("train", "validation", "test")}
    ).save_to_disk(str(bad_labels / "xnli" / "en"))
    inputs["transfer_bad_labels"] = str(bad_labels)
    wrong_schema = root / "transfer_wrong_schema"
    shutil.copytree(data / "xnli" / "de", wrong_schema / "xnli" / "de")
    save_task(root / "paws", "pawsx", "en", sizes=(16, 8, 8))
    shutil.copytree(root / "paws" / "pawsx" / "en", wrong_schema / "xnli" / "en")
    inputs["transfer_wrong_schema"] = str(wrong_schema)

    vec = "4 3\nanna 1 0 0\nsees 0 1 0\nlikes 0 0 1\nrome 1 1 0\n"
    (root / "en.vec").write_text(vec)
    (root / "de.vec").write_text(vec.replace("sees", "sieht").replace("likes", "mag").replace("rome", "rom"))
    (root / "bad.vec").write_text("anna 1 0 0\nsees 0 1 0\n")
    inputs |= {name: str(root / f"{name.split('_')[0]}.vec") for name in ("en_vec", "de_vec", "bad_vec")}
    omw = root / "omw"
    omw.mkdir()
    (omw / "wn-data-fra.tab").write_text("# fra\n00001740-n\tfra:lemma\tentité\n")
    (omw / "wn-data-ita.tab").write_text("# ita\n00001740-n\tita:lemma\tentità\n")
    inputs["omw"] = str(omw)
    unshared = root / "omw_unshared"  # each language's lemma in a synset of its own: no pair to mine
    unshared.mkdir()
    (unshared / "wn-data-fra.tab").write_text("# fra\n00001740-n\tfra:lemma\tentité\n")
    (unshared / "wn-data-ita.tab").write_text("# ita\n00002137-n\tita:lemma\tentità\n")
    inputs["omw_unshared"] = str(unshared)
    (root / "tiny.conllu").write_text(
        "# text = anna sees rome\n"
        "1\tanna\tanna\tPROPN\t_\t_\t2\tnsubj\t_\t_\n"
        "2\tsees\tsee\tVERB\t_\t_\t0\troot\t_\t_\n"
        "3\trome\trome\tPROPN\t_\t_\t2\tobj\t_\t_\n\n"
    )
    inputs["conllu"] = str(root / "tiny.conllu")
    inputs["eval_dir"] = str(root / "eval")
    (root / "eval" / "tatoeba").mkdir(parents=True)
    for side in ("fra", "eng"):  # only the names matter to the cases
        (root / "eval" / "tatoeba" / f"tatoeba.fra-eng.{side}").write_text("x\n")
    (root / "eval" / "multisimlex").mkdir()
    (root / "eval" / "bli" / "gbli" / "en-de").mkdir(parents=True)
    (root / "eval" / "multisimlex" / "ENG-FRA.csv").write_text("ID,ENG,FRA,PoS,score\n")
    return inputs


@pytest.fixture(scope="module")
def inputs(tmp_path_factory, distalign_home):
    import transformers  # noqa: F401

    import distalign.train.trainer  # noqa: F401  the imports every command pays once, outside the cases' clocks

    return build_inputs(tmp_path_factory.mktemp("bad_inputs"))


def filled(texts, inputs) -> list[str]:
    return [text.format(**inputs) for text in texts]


class RayStarted(BaseException):
    """Raised by the trap in ``ray.init``: a case reached Ray (BaseException: no ``except Exception`` hides it)."""


def run_in_process(argv: list[str], capsys, monkeypatch) -> tuple[int, str, float]:
    """Exit status, stderr and seconds of ``distalign <argv>`` run by ``main`` in this process."""
    import ray

    from distalign.cli import main

    def trap(*args, **kwargs):
        raise RayStarted("ray.init was called")

    # a cluster an earlier test left running is neither joined nor shut down by the case
    monkeypatch.setattr(ray, "init", trap)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "shutdown", lambda *args, **kwargs: None)
    capsys.readouterr()
    start = time.monotonic()
    try:
        if argv[0].startswith("job:"):
            status = run_job_script(argv[0].removeprefix("job:"), argv[1:], monkeypatch)
        else:
            status = main(argv)
    except SystemExit as exit:
        status = exit.code if isinstance(exit.code, int) else 1
        if isinstance(exit.code, str):
            print(exit.code, file=sys.stderr)
    except RayStarted:
        pytest.fail(f"distalign {' '.join(argv)}: reached ray.init\n{capsys.readouterr().err[-3000:]}")
    except Exception:  # what the user would see as a traceback
        pytest.fail(f"distalign {' '.join(argv)}: raised\n{traceback.format_exc()[-4000:]}")
    return status, capsys.readouterr().err, time.monotonic() - start


def run_job_script(name: str, args: list[str], monkeypatch) -> int:
    import runpy

    monkeypatch.setattr(sys, "argv", [str(REPO / "jobs" / name), *args])
    runpy.run_path(str(REPO / "jobs" / name), run_name="__main__")
    return 0


@contextlib.contextmanager
def refusing_mlflow(status: int, readable: tuple[str, ...] = ()) -> Iterator[str]:
    """An HTTP server on loopback answering ``status`` to every request but a GET of the ``readable`` API paths
    (answered with an empty search result); yields its URL. 401: a tracking server with auth and no credentials;
    403: one whose user may read (search) but not write."""
    import http.server
    import threading

    class Refuse(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path.split("?")[0] in readable:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b"{}")
                return
            self.send_response(status)
            if status == 401:
                self.send_header("WWW-Authenticate", 'Basic realm="mlflow"')
            self.end_headers()
            self.wfile.write(b"Permission denied")

        do_POST = do_GET

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Refuse)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


@pytest.fixture(scope="module")
def unauthorised_mlflow():
    with refusing_mlflow(401) as url:
        yield url


def guarded_s3_credentials(s3, user: str, monkeypatch) -> dict[str, str]:
    """The environment's AWS credentials set to ``user``'s on the guarded endpoint; its url and the key id."""
    key, secret = {
        "unknown": (s3.unknown_key, "not-a-secret"),
        "wrong-secret": (s3.keys["writer"][0], "not-the-secret"),
    }.get(user) or s3.keys[user]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    return {"guarded_url": s3.url, "access_key": key}


def params():
    return [pytest.param(c, id=c.id, marks=[pytest.mark.heavy] if c.heavy or c.s3_user else []) for c in CASES]


@pytest.mark.parametrize("bad", params())
def test_a_bad_input_gets_one_clear_message(bad: Case, inputs, unauthorised_mlflow, request, capsys, monkeypatch):
    values = dict(inputs, unauthorised_mlflow=unauthorised_mlflow)
    if bad.heavy:
        url, _ = request.getfixturevalue("s3_endpoint")
        values["s3_url"] = url
    if bad.s3_user:
        values |= guarded_s3_credentials(request.getfixturevalue("guarded_s3"), bad.s3_user, monkeypatch)
    argv = filled(bad.argv, values)
    status, err, seconds = run_in_process(argv, capsys, monkeypatch)
    assert status == 2, f"distalign {' '.join(argv)}: exit status {status}\n{err}"
    assert "Traceback" not in err, err
    for part in filled(bad.says, values):
        assert part in err, f"distalign {' '.join(argv)}: the message does not say {part!r}:\n{err}"
    assert seconds < LIMIT_S, f"{seconds:.1f} s"


@pytest.mark.heavy
@pytest.mark.parametrize("bad", [c for c in CASES if c.id in SUBPROCESS_CASES], ids=lambda c: c.id)
def test_a_bad_input_as_the_user_meets_it(bad: Case, inputs):
    """The same rows as real processes: the console script, and jobs/train.py as ``ray job submit`` runs it. Their
    time includes the imports (seconds, more on a loaded machine): it is printed, not held to the in-process limit."""
    argv = filled(bad.argv, inputs)
    command = (
        [sys.executable, str(REPO / "jobs" / argv[0].removeprefix("job:")), *argv[1:]]
        if argv[0].startswith("job:")
        else [str(Path(sys.executable).parent / "distalign"), *argv]
    )
    started = time.monotonic()
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=300, env=dict(os.environ, PYTHONPATH=str(REPO))
    )
    print(f"{bad.id}: exit {done.returncode} in {time.monotonic() - started:.1f} s")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert "error:" in last and all(part in done.stderr for part in filled(bad.says, inputs)), done.stderr


@pytest.mark.heavy
def test_a_permitted_key_passes_the_storage_check_which_leaves_no_object(guarded_s3, monkeypatch):
    """The guarded endpoint's refusals above are its IAM checks, not a broken signature: the writer's key passes
    ``check_storage`` and lists its corpus. The check's write probe is deleted again; what stays is the empty
    folder marker of storage.path (pyarrow keeps a folder it deleted the last file of; Ray would make it anyway)."""
    import boto3

    from distalign.data.corpus_stream import list_corpus_files
    from distalign.data.sources import CorpusSource
    from distalign.storage import check_storage, s3_filesystem

    guarded_s3_credentials(guarded_s3, "writer", monkeypatch)
    key, secret = guarded_s3.keys["writer"]  # given, not read from the environment by boto3's cached default session
    s3 = boto3.client("s3", endpoint_url=guarded_s3.url, aws_access_key_id=key, aws_secret_access_key=secret)
    before = {o["Key"] for o in s3.list_objects_v2(Bucket="guarded").get("Contents", [])}
    check_storage("s3://guarded/runs", guarded_s3.url)
    assert {o["Key"] for o in s3.list_objects_v2(Bucket="guarded").get("Contents", [])} <= before | {"runs/"}
    listed = list_corpus_files(
        CorpusSource("s3://guarded/corpus/", "en"), "data.corpora[0]", s3_filesystem(guarded_s3.url)
    )
    assert listed.paths == ["guarded/corpus/en.txt"]


@pytest.mark.heavy
def test_artifacts_on_s3_refusing_the_key_fail_the_run_with_one_clear_message(guarded_s3, tmp_path, monkeypatch):
    """An MLflow experiment whose artifacts go straight to S3 (a tracking server without --serve-artifacts, or a
    store whose experiment names an s3:// location) and a key the bucket refuses: the run's first artifact write
    fails with a ``ConfigError`` naming the location and what to check, and the run is FAILED, not left RUNNING.
    (This comes after Ray starts: MLflow gives an experiment's artifact location only once the run exists.)"""
    import boto3
    from mlflow.store.artifact import s3_artifact_repo

    from distalign.errors import ConfigError
    from distalign.tracking import client_for, tracked_run

    # as in a fresh process: boto3's default session and MLflow's S3 clients keep the credentials they first found
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    s3_artifact_repo._cached_get_s3_client.cache_clear()
    guarded_s3_credentials(guarded_s3, "stranger", monkeypatch)
    monkeypatch.setenv("MLFLOW_S3_ENDPOINT_URL", guarded_s3.url)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = client_for(uri)
    experiment = client.create_experiment("s3-artifacts", artifact_location="s3://guarded/mlflow")
    with pytest.raises(ConfigError) as raised:
        with tracked_run(uri, "s3-artifacts", "refused", str(tmp_path / "runs"), {"train.lr": 1e-3}, {}):
            pytest.fail("the run opened")
    [run] = client.search_runs([experiment])
    assert run.info.status == "FAILED"
    message = str(raised.value)
    for part in (
        f"run {run.info.run_id}'s artifacts cannot be written to s3://guarded/mlflow/",
        "AccessDenied",
        "check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (and MLFLOW_S3_ENDPOINT_URL) or the bucket policy",
    ):
        assert part in message, message


def test_a_tracking_server_refusing_a_run_in_the_experiment_gives_one_clear_message(monkeypatch):
    """A tracking server with auth whose user may read (the start's ``check_reachable`` passes) but not write the
    experiment (MLflow's default_permission READ, an experiment of another user): opening the run says so, naming
    the user and the experiment. (This comes after Ray starts: nothing but a write shows the permission.)"""
    from distalign.errors import ConfigError
    from distalign.tracking import check_reachable, tracked_run

    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "alice")
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "pw-alice")
    with refusing_mlflow(403, readable=("/api/2.0/mlflow/experiments/search",)) as url:
        check_reachable(url)
        with pytest.raises(ConfigError) as raised:
            with tracked_run(url, "shared", "denied", "/tmp/runs", {}, {}):
                pytest.fail("the run opened")
    message = str(raised.value)
    for part in (
        f"tracking.uri {url}: the MLflow tracking server refuses user alice a run in experiment 'shared'",
        "PERMISSION_DENIED",
        "ask its admin for EDIT permission",
    ):
        assert part in message, message


def tree_digest(*roots: Path) -> dict[str, str]:
    return {
        str(path): hashlib.sha256(path.read_bytes()).hexdigest()
        for root in roots
        for path in sorted(root.rglob("*") if root.is_dir() else [root])
        if path.is_file()
    }


def test_a_bad_resume_leaves_the_run_as_it_was(inputs, tmp_path, capsys, monkeypatch):
    """A run with a checkpoint and its MLflow run in sqlite, started again (same run.name: a resume) with a bad
    input: the error comes before anything is written; every file of the run and the store is unchanged."""
    from distalign.tracking import tracked_run

    storage, db = tmp_path / "runs", tmp_path / "mlflow.db"
    uri = f"sqlite:///{db}"
    with tracked_run(uri, "distalign", "bad-inputs", str(storage), {"train.lr": 1e-3}, {"train": {"lr": 1e-3}}) as run:
        checkpoint = storage / "bad-inputs" / "checkpoint_2026-11-27_00-00-00.000000"
        shutil.copytree(inputs["model"], checkpoint / "model")
        (checkpoint / "trainer_state.json").write_text(json.dumps({"step": 6, "mlflow_run_id": run}))
        (checkpoint / "optimizer.pt").write_bytes(b"")
    before = tree_digest(storage, db)
    for bad in (
        f"model.name_or_path={inputs['model_other_tokenizer']}",
        f"data.constraints=[{inputs['corrupt_parquet']}]",
        "train.engine=horovod",
        "train.engine=deepspeed",
        f"tracking.uri=http://127.0.0.1:{inputs['closed_port']}",
    ):
        argv = [
            "train",
            inputs["files_config"],
            "run.name=bad-inputs",
            f"storage.path={storage}",
            f"tracking.uri={uri}",
            bad,
        ]
        status, err, _ = run_in_process(argv, capsys, monkeypatch)
        assert status == 2 and "distalign: error:" in err, err
        assert tree_digest(storage, db) == before, bad


# ---------------------------------------------------------------------------------------------------------------
# the page


def render_page(cases: list[Case]) -> str:
    """docs/reference/bad-inputs.md from the table (the messages abridged to the parts the test checks)."""

    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    def shown(text: str) -> str:
        return re.sub(r"\{(\w+)\}", r"<\1>", text)

    fixed = sum(c.fixed for c in cases)
    lines = [
        "# Bad inputs: what each command answers",
        "",
        "<!-- generated from the CASES table of tests/test_bad_inputs.py by `python tests/test_bad_inputs.py`; "
        "test_the_page_lists_exactly_the_cases fails when they differ -->",
        "",
        f"{len(cases)} wrong inputs tried, each a case of `tests/test_bad_inputs.py`; {fixed} of them did not meet the "
        "bar before this table was made and were fixed (marked †). The bar: one message naming the input and what to "
        "do (`distalign: error: ...` on stderr), exit status 2 (argparse's for a malformed flag), no traceback, in "
        f"under {LIMIT_S:.0f} s once the command's modules are imported, and before Ray starts.",
        "",
        "Paths are shown as `<name>` (the test's inputs). *before Ray?*: **yes**, stopped before `ray.init` (the "
        "test replaces it with a trap); **no Ray**, a command that never starts Ray. A run started again with a bad "
        "input (same `run.name`: a resume) leaves its checkpoints and MLflow store byte for byte as they were "
        "(`test_a_bad_resume_leaves_the_run_as_it_was`).",
        "",
        "| command | wrong input | message (abridged) | before Ray? |",
        "|---|---|---|---|",
    ]
    for c in cases:
        command = (
            f"python jobs/{c.command.removeprefix('jobs/')}"
            if c.command.startswith("jobs/")
            else f"distalign {c.command}"
        )
        message = " … ".join(f"`{cell(shown(part))}`" for part in c.says)
        lines.append(f"| {command} | {cell(c.wrong)}{' †' if c.fixed else ''} | {message} | {c.ray} |")
    return "\n".join(lines) + "\n"


def test_the_page_lists_exactly_the_cases():
    assert PAGE.is_file() and PAGE.read_text() == render_page(CASES), (
        "docs/reference/bad-inputs.md differs from CASES: run python tests/test_bad_inputs.py"
    )


if __name__ == "__main__":
    PAGE.parent.mkdir(parents=True, exist_ok=True)
    PAGE.write_text(render_page(CASES))
    print(f"{PAGE}: {len(CASES)} cases")
