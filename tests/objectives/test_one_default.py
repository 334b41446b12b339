"""One default per value: an objective's config dataclass owns its defaults. A constructor argument named
after a config field either has no default or the config's own (a second, diverging default would make
the object built in a test differ from the one the YAML builds)."""

import dataclasses
import inspect

import pytest

from distalign.objectives.lexical import LexicalConfig, LexicalObjective, global_info_nce, info_nce
from distalign.objectives.registry import OBJECTIVES


@pytest.mark.parametrize("name", sorted(OBJECTIVES))
def test_constructor_defaults_are_the_configs(name):
    plugin = OBJECTIVES[name]
    config_defaults = {
        f.name: f.default for f in dataclasses.fields(plugin.Config) if f.default is not dataclasses.MISSING
    }
    diverging = {
        arg: (param.default, config_defaults[arg])
        for arg, param in inspect.signature(plugin.__init__).parameters.items()
        if arg in config_defaults
        and param.default is not inspect.Parameter.empty
        and param.default != config_defaults[arg]
    }
    assert not diverging, f"{name}: constructor default vs config default: {diverging}"


def test_lexical_objective_is_built_from_its_config():
    built = LexicalObjective.build(LexicalConfig(), ctx=None)
    assert built.temperature == LexicalConfig.temperature and built.gloss_weight == LexicalConfig.gloss_weight
    assert built.contrast is global_info_nce  # global_negatives: true, the config's default
    assert LexicalObjective(LexicalConfig(global_negatives=False)).contrast is info_nce
