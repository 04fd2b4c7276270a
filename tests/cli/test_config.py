"""countersign.toml: loading, every validation error's wording, path resolution, factories.

Error messages are asserted in full where they are the product: a person reads them after a
typo, and they must say which file, which key and what is wrong.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from crew_runtime.config import (
    Config,
    ConfigError,
    CrewSpec,
    UnknownCrewError,
    load_config,
    load_factory,
    parse_duration,
)
from storage.retention import Retention
from tests.support.configs import error_for, write

FULL = """
[crews.blog]
factory = "my_crews.blog:build"
description = "Outline and write a blog post"
channel = "#content-review"
reviewers = ["U012ABCDEF", "W0ENTERPRISE", "S0GROUP01"]
remind_after = "30m"
escalate_after = "2h"
expire_after = 86400
escalate_to = ["U0LEAD0001"]
approval_tools = ["send_email", "publish"]
inputs = ["topic", "audience"]
optional_inputs = ["tone"]

[flows.onboarding]
factory = "my_crews.onboarding:Flow.build"
"""


def test_a_full_file_loads_into_specs(tmp_path: Path) -> None:
    path = write(tmp_path, FULL)

    config = load_config(path)

    assert config.path == path
    assert list(config.crews) == ["blog", "onboarding"]
    assert config.get("blog") == CrewSpec(
        name="blog",
        kind="crew",
        factory="my_crews.blog:build",
        description="Outline and write a blog post",
        channel="#content-review",
        reviewers=("U012ABCDEF", "W0ENTERPRISE", "S0GROUP01"),
        remind_after=timedelta(minutes=30),
        escalate_after=timedelta(hours=2),
        expire_after=timedelta(days=1),
        escalate_to=("U0LEAD0001",),
        approval_tools=("send_email", "publish"),
        required_inputs=("topic", "audience"),
        optional_inputs=("tone",),
    )
    assert config.get("onboarding") == CrewSpec(
        name="onboarding", kind="flow", factory="my_crews.onboarding:Flow.build"
    )


def test_the_loaded_config_cannot_be_changed(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, FULL))

    with pytest.raises(TypeError):
        config.crews["other"] = config.get("blog")  # type: ignore[index]


def test_an_empty_file_defines_no_crews_and_get_says_so(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, ""))

    with pytest.raises(UnknownCrewError) as caught:
        config.get("blog")

    assert (
        str(caught.value)
        == f'{config.path}: no crew or flow named "blog" (known: none are defined)'
    )


def test_get_an_unknown_name_lists_the_known_ones(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, FULL))

    with pytest.raises(UnknownCrewError) as caught:
        config.get("blgo")

    assert isinstance(caught.value, ConfigError)
    assert str(caught.value) == (
        f'{config.path}: no crew or flow named "blgo" (known: blog, onboarding)'
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "[settings]\nx = 1",
            "settings: unknown top-level key; the file holds only [crews.NAME], "
            "[flows.NAME] and [retention] tables",
        ),
        (
            "[crew.blog]\nfactory = 'a:b'",
            'crew: unknown top-level key (did you mean "crews"?); '
            "the file holds only [crews.NAME], [flows.NAME] and [retention] tables",
        ),
        ("crews = 1", "crews: expected tables like [crews.NAME], got 1"),
        ("[crews]\nblog = 'a:b'", 'crews.blog: expected a table [crews.blog], got "a:b"'),
        (
            "[crews.Blog]\nfactory = 'a:b'",
            'crews.Blog: invalid name "Blog": use lowercase '
            'letters, digits, "-" and "_", starting with a letter or digit',
        ),
        (
            "[crews.-blog]\nfactory = 'a:b'",
            'crews.-blog: invalid name "-blog": use lowercase '
            'letters, digits, "-" and "_", starting with a letter or digit',
        ),
        (
            "[crews.blog]\nfactory = 'a:b'\n[flows.blog]\nfactory = 'a:c'",
            'flows.blog: the name "blog" is already used by crews.blog',
        ),
        (
            "[crews.blog]\ndescription = 'x'",
            'crews.blog.factory: missing; every crew needs factory = "module:function"',
        ),
        ("[crews.blog]\nfactory = 3", "crews.blog.factory: expected a string, got 3"),
        (
            "[crews.blog]\nfactory = 'my_crews.blog'",
            "crews.blog.factory: expected "
            '"module:function", e.g. "my_crews.blog:build", got "my_crews.blog"',
        ),
        (
            "[crews.blog]\nfactory = 'a:b'\nreviewer = ['U0123ABC']",
            'crews.blog.reviewer: unknown key (did you mean "reviewers"?); known keys: factory, '
            "description, channel, reviewers, remind_after, escalate_after, expire_after, "
            "on_expire, remind_by, escalate_to, approval_tools, inputs, optional_inputs, "
            "keep_journal, keep_runs, keep_audit, approvals_required, forbid_self_approval, "
            "progress, reviewers_from_input, "
            "gates, tasks, webhooks, stages, rules",
        ),
        (
            "[crews.blog]\nfactory = 'a:b'\ndescription = ['x']",
            "crews.blog.description: expected a string, got a list",
        ),
        (
            "[crews.blog]\nfactory = 'a:b'\nchannel = 'Content Review'",
            "crews.blog.channel: "
            'expected a channel id like "C0123ABCD" or a name like "#reviews", '
            'got "Content Review"',
        ),
        (
            "[crews.blog]\nfactory = 'a:b'\nreviewers = 'U0123ABC'",
            'crews.blog.reviewers: expected a list like [...], got "U0123ABC"',
        ),
        (
            "[crews.blog]\nfactory = 'a:b'\nreviewers = ['U0123ABC', 'bob']",
            'crews.blog.reviewers[1]: expected a Slack user id ("U…", "W…") or user-group id '
            '("S…"), got "bob"',
        ),
        (
            "[crews.blog]\nfactory = 'a:b'\nreviewers = ['U0123ABC', 'U0123ABC']",
            'crews.blog.reviewers[1]: "U0123ABC" is listed twice',
        ),
        (
            "[crews.blog]\nfactory = 'a:b'\nreviewers = [7]",
            'crews.blog.reviewers[0]: expected a Slack user id ("U…", "W…") or user-group id '
            '("S…"), got 7',
        ),
        (
            "[crews.blog]\nfactory = 'a:b'\nescalate_to = ['S0GROUP01']",
            'crews.blog.escalate_to[0]: expected a Slack user id ("U…", "W…"), got "S0GROUP01"',
        ),
        (
            "[crews.blog]\nfactory = 'a:b'\napproval_tools = ['']",
            'crews.blog.approval_tools[0]: expected a tool name, got ""',
        ),
        (
            "[crews.blog]\nfactory = 'a:b'\ninputs = ['the topic']",
            'crews.blog.inputs[0]: expected an input name like "topic", got "the topic"',
        ),
        (
            "[crews.blog]\nfactory = 'a:b'\nprogress = 'off'",
            'crews.blog.progress: expected true or false, got "off"',
        ),
        (
            "[crews.blog]\nfactory = 'a:b'\noptional_inputs = ['a-b']",
            'crews.blog.optional_inputs[0]: expected an input name like "tone", got "a-b"',
        ),
        (
            "[flows.intake]\nfactory = 'a:b'\nbogus = 1",
            "flows.intake.bogus: unknown key; known keys: factory, description, channel, "
            "reviewers, remind_after, escalate_after, expire_after, on_expire, remind_by, "
            "escalate_to, "
            "approval_tools, inputs, optional_inputs, keep_journal, keep_runs, keep_audit, "
            "approvals_required, forbid_self_approval, progress, reviewers_from_input, gates, "
            "tasks, webhooks, stages, rules",
        ),
    ],
)
def test_each_error_names_the_key_and_what_is_wrong(
    tmp_path: Path, text: str, expected: str
) -> None:
    assert error_for(tmp_path, text) == expected


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("'soon'", '"soon"'),
        ("0", "0"),
        ("-5", "-5"),
        ("'0m'", '"0m"'),
        ("true", "true"),
        ("1.5", "1.5"),
        ("'30 minutes'", '"30 minutes"'),
        ("['30m']", "a list"),
    ],
)
def test_bad_durations_are_refused(tmp_path: Path, value: str, shown: str) -> None:
    message = error_for(tmp_path, f"[crews.writer]\nfactory = 'a:b'\nremind_after = {value}")

    assert message == (
        f'crews.writer.remind_after: expected a duration like "30m", got {shown} (units s, m, '
        'h, d, y as in "90s", "1h30m" or "1y", or a positive whole number of seconds)'
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("90s", timedelta(seconds=90)),
        ("30m", timedelta(minutes=30)),
        ("2h", timedelta(hours=2)),
        ("1d", timedelta(days=1)),
        ("1h30m", timedelta(minutes=90)),
        ("1y", timedelta(days=365)),
        (45, timedelta(seconds=45)),
        (" 5m ", timedelta(minutes=5)),
        ("2x", None),
        ("", None),
        (True, None),
        (2.0, None),
    ],
)
def test_parse_duration(value: object, expected: timedelta | None) -> None:
    assert parse_duration(value) == expected


@pytest.mark.parametrize("channel", ["C0123ABCD", "G0PRIVATE1", "#reviews", "content-review"])
def test_channel_ids_and_names_are_accepted(tmp_path: Path, channel: str) -> None:
    config = load_config(write(tmp_path, f"[crews.blog]\nfactory = 'a:b'\nchannel = '{channel}'"))

    assert config.get("blog").channel == channel


def test_toml_syntax_errors_name_the_file_and_line(tmp_path: Path) -> None:
    message = error_for(tmp_path, "[crews.blog]\nfactory = 'a:b'\nreviewers = [\n  'U1',\n  =\n")

    assert message.startswith("line 5, column 3: invalid TOML: ")


def test_a_file_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "countersign.toml"
    path.write_bytes(b"[crews.blog]\ndescription = '\xff'\n")

    with pytest.raises(ConfigError, match=r"countersign\.toml: not UTF-8 text: invalid start byte"):
        load_config(path)


def test_a_directory_is_not_a_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"cannot read the configuration file"):
        load_config(tmp_path)


# --- where the file is looked for --------------------------------------------------------


def test_an_explicit_path_wins_over_the_environment_and_cwd(tmp_path: Path) -> None:
    explicit = write(tmp_path, "[crews.explicit]\nfactory = 'a:b'", "explicit.toml")
    from_env = write(tmp_path, "[crews.env]\nfactory = 'a:b'", "env.toml")
    write(tmp_path, "[crews.cwd]\nfactory = 'a:b'")

    config = load_config(explicit, environ={"COUNTERSIGN_CONFIG": str(from_env)}, cwd=tmp_path)

    assert list(config.crews) == ["explicit"]


def test_the_environment_wins_over_cwd(tmp_path: Path) -> None:
    from_env = write(tmp_path, "[crews.env]\nfactory = 'a:b'", "env.toml")
    write(tmp_path, "[crews.cwd]\nfactory = 'a:b'")

    config = load_config(environ={"COUNTERSIGN_CONFIG": str(from_env)}, cwd=tmp_path)

    assert (config.path, list(config.crews)) == (from_env, ["env"])


def test_cwd_is_the_last_resort_and_an_empty_variable_is_unset(tmp_path: Path) -> None:
    path = write(tmp_path, "[crews.cwd]\nfactory = 'a:b'")

    config = load_config(environ={"COUNTERSIGN_CONFIG": ""}, cwd=tmp_path)

    assert (config.path, list(config.crews)) == (path, ["cwd"])


def test_the_process_environment_is_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from_env = write(tmp_path, "[crews.env]\nfactory = 'a:b'", "env.toml")
    monkeypatch.setenv("COUNTERSIGN_CONFIG", str(from_env))

    assert list(load_config(cwd=tmp_path / "elsewhere").crews) == ["env"]


@pytest.mark.parametrize(
    ("explicit", "environ", "origin"),
    [
        (True, {}, "the path given"),
        (False, {"COUNTERSIGN_CONFIG": "MISSING"}, "$COUNTERSIGN_CONFIG"),
        (False, {}, "the default location"),
    ],
)
def test_a_missing_file_says_where_it_looked_and_how_to_point_at_one(
    tmp_path: Path, explicit: bool, environ: dict[str, str], origin: str
) -> None:
    missing = tmp_path / "countersign.toml"
    environ = {k: str(missing) for k in environ}

    with pytest.raises(ConfigError) as caught:
        load_config(missing if explicit else None, environ=environ, cwd=tmp_path)

    assert str(caught.value) == (
        f"{missing}: configuration file not found (tried {origin}); pass its path explicitly "
        "or set COUNTERSIGN_CONFIG=/path/to/countersign.toml"
    )


# --- factories ---------------------------------------------------------------------------

FACTORY_MODULES = {
    "cs_test_factories": """
        def build(inputs):
            return ("crew", inputs)

        class Builders:
            @staticmethod
            def flow(inputs):
                return ("flow", inputs)

        NOT_CALLABLE = 42
    """,
    "cs_test_broken_dependency": "import cs_test_no_such_dependency\n",
    "cs_test_broken_code": "raise RuntimeError('database URL not set')\n",
}


@pytest.fixture
def factories(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name, source in FACTORY_MODULES.items():
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    for name in FACTORY_MODULES:
        sys.modules.pop(name, None)


def spec(factory: str) -> CrewSpec:
    return CrewSpec(name="blog", factory=factory)


@pytest.mark.usefixtures("factories")
def test_load_factory_imports_functions_and_nested_attributes() -> None:
    assert load_factory(spec("cs_test_factories:build"))({"topic": "otters"}) == (
        "crew",
        {"topic": "otters"},
    )
    assert load_factory(spec("cs_test_factories:Builders.flow"))({}) == ("flow", {})


@pytest.mark.usefixtures("factories")
@pytest.mark.parametrize(
    ("factory", "expected"),
    [
        ("cs_test_factories", 'expected "module:function", e.g. "my_crews.blog:build"'),
        ("cs test:build", 'expected "module:function", e.g. "my_crews.blog:build"'),
        (
            "cs_test_missing:build",
            'no module named "cs_test_missing" (is it installed, or on sys.path?)',
        ),
        (
            "cs_test_missing.sub:build",
            'no module named "cs_test_missing" (is it installed, or on sys.path?)',
        ),
        (
            "cs_test_broken_dependency:build",
            'importing "cs_test_broken_dependency" failed: No '
            "module named 'cs_test_no_such_dependency'",
        ),
        (
            "cs_test_broken_code:build",
            'importing "cs_test_broken_code" failed: RuntimeError: database URL not set',
        ),
        ("cs_test_factories:nope", 'module "cs_test_factories" has no attribute "nope"'),
        (
            "cs_test_factories:Builders.nope",
            'module "cs_test_factories" has no attribute "Builders.nope"',
        ),
        ("cs_test_factories:NOT_CALLABLE", "not callable (it is a int)"),
    ],
)
def test_load_factory_errors_name_the_crew_and_the_factory(factory: str, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_factory(spec(factory))

    assert str(caught.value) == f'crews.blog.factory: "{factory}": {expected}'


def test_load_config_does_not_import_factories(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, "[crews.blog]\nfactory = 'cs_test_never_imported:x'"))

    assert isinstance(config, Config)
    assert "cs_test_never_imported" not in sys.modules


def test_retention_is_the_deployments_with_each_crews_own_keys(tmp_path: Path) -> None:
    config = load_config(
        write(
            tmp_path,
            "[retention]\nkeep_journal = '30d'\nkeep_runs = '1y'\n\n"
            "[crews.blog]\nfactory = 'a:b'\nkeep_runs = '12h'\n\n"
            "[crews.news]\nfactory = 'a:b'\n",
        )
    )

    policy = config.retention_policy()

    month, year = timedelta(days=30), timedelta(days=365)
    assert policy.default == Retention(keep_journal=month, keep_runs=year)
    assert dict(policy.crews) == {
        "blog": Retention(keep_journal=month, keep_runs=timedelta(hours=12))
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "[retention]\nkeep_runs = 'forever'",
            'retention.keep_runs: expected a duration like "30m", got "forever"',
        ),
        ("[retention]\nkeep_logs = '1d'", "retention.keep_logs: unknown key"),
        ("retention = '1y'", 'retention: expected a table [retention], got "1y"'),
        (
            "[crews.blog]\nfactory = 'a:b'\nkeep_journal = 0",
            'crews.blog.keep_journal: expected a duration like "30m", got 0',
        ),
    ],
)
def test_bad_retention_is_refused_naming_the_key(tmp_path: Path, text: str, expected: str) -> None:
    assert error_for(tmp_path, text).startswith(expected)
