"""The configuration file, ``countersign.toml``: which crews exist and who reviews them.

Each crew (or flow) a Slack user may start is one table. The file names a *factory*, not a
crew object, so the file stays data: the factory is imported only when a run needs it
(:func:`load_factory`), which keeps listing crews cheap (importing crewai costs seconds).

Example::

    [crews.blog]
    factory = "my_crews.blog:build"      # module:function, called as build(inputs) -> Crew
    description = "Outline and write a blog post"
    channel = "#content-review"          # channel id ("C0123ABCD") or name
    reviewers = ["U012ABCDEF", "S0GROUP01"]  # users (U…/W…) or user groups (S…); empty = anyone
    remind_after = "30m"                 # "90s", "30m", "2h", "1d", "1h30m", or seconds as an int
    escalate_after = "2h"
    escalate_to = ["U0LEAD0001"]         # user ids
    expire_after = "1d"
    on_expire = "reject"                 # or "approve", or "keep_waiting" (no expiry)
    remind_by = "thread"                 # or "dm": reminders and escalations as DMs
    approval_tools = ["send_email"]      # tool calls that need a human's approval
    inputs = ["topic"]                   # required inputs: /crew run blog topic="..."
    optional_inputs = ["tone"]           # inputs a run may be given; no others are taken
    approvals_required = 2               # distinct reviewers who must approve each review
    forbid_self_approval = true          # who started a run may not approve its reviews
    progress = false                     # no live progress message in the run's thread

    [crews.deal]
    factory = "my_crews.deal:build"
    inputs = ["customer", "approver"]
    reviewers_from_input = "approver"     # /crew run deal approver=@dana: Dana reviews that run
    webhooks = [                          # signed POSTs of its events: docs/guide/webhooks.md
      {url = "https://hooks.example.com/deal", events = ["run.waiting", "run.finished",
       "review.decided"], secret_env = "DEAL_WEBHOOK_SECRET"},
    ]

    [crews.blog.gates.send_email]        # a gated tool's calls: their own quorum and deadlines
    approvals_required = 3
    expire_after = "4h"
    on_expire = "approve"

    [crews.blog.tasks.2]                 # the second task's reviews (tasks count from 1)
    approvals_required = 1

    [crews.blog.tasks.3]                 # an approval chain: legal, then a manager
    stages = [
      { name = "legal", reviewers = ["S0LEGAL"] },
      { name = "manager", reviewers = ["U0MAN1", "U0MAN2"], approvals_required = 1 },
    ]

    [flows.onboarding]
    factory = "my_crews.onboarding:build"
    keep_runs = "90d"                    # this crew's own retention (below)

    [retention]                          # the deployment's; none of it: keep everything
    keep_journal = "30d"                 # a finished run's journal
    keep_runs = "1y"                     # a finished run with all its rows
    keep_audit = "2y"                    # who decided what, after its run was pruned

Keys and defaults (every key but ``factory`` is optional):

==================  ==========================================  ===========
key                 meaning                                     default
==================  ==========================================  ===========
``factory``         ``"module:function"``; ``function(inputs:  required
                    dict[str, str])`` returns the crew or flow
``description``     one line shown in Slack                     ``""``
``channel``         where runs are posted                       none
``reviewers``       who may decide; empty means anyone          ``[]``
``remind_after``    remind the reviewers after this long        none
``escalate_after``  escalate to ``escalate_to`` after this long none
``expire_after``    expire the review after this long           none
``on_expire``       what ``expire_after`` does: ``"reject"``,   ``"reject"``
                    ``"approve"`` (decided by ``deadline``) or
                    ``"keep_waiting"`` (no expiry)
``remind_by``       ``"thread"``, or ``"dm"``: reminders and    ``"thread"``
                    escalations as DMs to each person named
``escalate_to``     user ids to escalate to                     ``[]``
``approval_tools``  names of tools whose calls need approval    ``[]``
``inputs``          names of inputs a run must be given         ``[]``
``optional_inputs`` names of inputs a run may be given          ``[]``
``approvals_required`` distinct reviewers' approvals a review   ``1``
                    needs (any rejection or changes decide it)
``forbid_self_approval`` the run's starter may not approve      ``false``
``progress``        one message in the run's thread, edited as  ``true``
                    the crew moves (tasks, tool calls, waits)
``reviewers_from_input`` the input (one of ``inputs``) naming   none
                    the run's one reviewer, a Slack user
``stages``          an approval chain instead of               none
                    ``approvals_required``: a list of
                    ``{name, reviewers, approvals_required}``,
                    each stage asked once the one before
                    approved (``crew_runtime.stage_checks``)
``gates``           ``{tool: {approvals_required, stages,      ``{}``
                    remind_after, escalate_after, expire_after,
                    on_expire, remind_by, allow_standing,
                    standing_match, rules}}``
``tasks``           ``{task number: {the same keys}}``         ``{}``
                    (all but ``allow_standing``, ``standing_match``
                    and ``rules``)
``rules``           ``[{name, tool, when, decide, reason,      ``[]``
                    approvals, expire_after, reviewers,
                    stages}]``: rules that approve, reject
                    or raise a gated call's review (its
                    reviewers or stages in the gate's
                    place), in CEL (``crew_runtime.rules``)
``webhooks``        ``[{url, events, secret_env}]``: where to   ``[]``
                    POST which of ``run.waiting``,
                    ``run.finished``, ``review.decided``,
                    signed with the secret in the environment
                    variable ``secret_env`` names
``keep_journal``    this crew's own ``[retention]`` keys        the
``keep_runs``                                                   deployment's
``keep_audit``
==================  ==========================================  ===========

A review's quorum is its gate's or its task's ``approvals_required`` when the crew sets one,
else the crew's; so is each of its deadline keys (:meth:`CrewSpec.deadlines_for`), key by key.
An ``on_expire`` that cannot act (``"approve"``/``"reject"`` with no ``expire_after``, or
``"keep_waiting"`` beside an ``expire_after`` of the same table) is an error. With
``reviewers`` listing only users, a quorum above their number is an
error (nobody could reach it).

A gate's ``allow_standing = true`` lets the approval of one call of its tool also approve the
tool's later calls in the run (a standing approval), those whose arguments named in
``standing_match`` (default: none, so every call) have the approved call's values; only where
its calls need one approval (its ``approvals_required``, else the crew's, is 1). In Slack its
calls' reviews then have an "Approve all <tool> calls" button beside Approve.

With ``reviewers_from_input``, each run names its own reviewer: the input holds a Slack user
id (``/crew run`` takes a mention), and that person alone decides the run's reviews and is
the one reminded. It cannot be combined with ``reviewers``, and every quorum stays 1.

A webhook's secret is never in the file: ``secret_env`` names the environment variable that
holds it (a ``secret`` key is an error), and ``serve`` refuses to start when one is unset
(:func:`crew_runtime.webhooks.webhook_secrets`). A crew lists a URL once.

A crew that names inputs (either key) takes no others: a run given an input it does not
name is refused with the names it takes. A crew that names none takes any.

Names match ``[a-z0-9][a-z0-9_-]*`` and are unique across ``crews`` and ``flows``. Unknown keys
are errors, not warnings: a misspelt ``reviewers`` would otherwise let anyone approve.

Errors: every problem raises :class:`ConfigError` whose message names the file, the dotted key
and what is wrong, e.g. ``countersign.toml: crews.writer.remind_after: expected a duration like
"30m", got "soon"``.

ConfigError
└── UnknownCrewError        :meth:`Config.get` with a name the file does not define
"""

from __future__ import annotations

import importlib
import os
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from crew_runtime.config_checks import describe_toml_error, parse_config, parse_duration
from crew_runtime.specs import (
    FACTORY_RE,
    NOBODY,
    Config,
    ConfigError,
    CrewSpec,
    Deadlines,
    UnknownCrewError,
    rule_of,
)

__all__ = [
    "CONFIG_ENV_VAR",
    "DEFAULT_CONFIG_NAME",
    "NOBODY",
    "Config",
    "ConfigError",
    "CrewSpec",
    "Deadlines",
    "UnknownCrewError",
    "load_config",
    "load_factory",
    "parse_duration",
    "rule_of",
]


CONFIG_ENV_VAR = "COUNTERSIGN_CONFIG"
DEFAULT_CONFIG_NAME = "countersign.toml"


def load_config(
    path: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Config:
    """Read and validate the configuration file.

    The file is found in this order: ``path`` if given; else the ``COUNTERSIGN_CONFIG``
    environment variable; else ``countersign.toml`` in ``cwd``. ``environ`` and ``cwd`` default
    to the process's own and are parameters so callers (and tests) decide what is read.

    Args:
        path: An explicit path to the file.
        environ: The environment to read ``COUNTERSIGN_CONFIG`` from.
        cwd: The directory searched last.

    Returns:
        The validated configuration. Factories are not imported; see :func:`load_factory`.

    Raises:
        ConfigError: The file is missing, unreadable, not TOML, or not valid configuration.
    """
    env = os.environ if environ is None else environ
    if path is not None:
        file, origin = Path(path), "the path given"
    elif env.get(CONFIG_ENV_VAR):
        file, origin = Path(env[CONFIG_ENV_VAR]), f"${CONFIG_ENV_VAR}"
    else:
        file = (Path.cwd() if cwd is None else cwd) / DEFAULT_CONFIG_NAME
        origin = "the default location"
    try:
        raw = file.read_bytes()
    except FileNotFoundError:
        raise ConfigError(
            f"{file}: configuration file not found (tried {origin}); pass its path explicitly "
            f"or set {CONFIG_ENV_VAR}=/path/to/{DEFAULT_CONFIG_NAME}"
        ) from None
    except OSError as exc:
        raise ConfigError(f"{file}: cannot read the configuration file: {exc.strerror}") from exc
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{file}: not UTF-8 text: {exc.reason} at byte {exc.start}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: {describe_toml_error(str(exc))}") from None
    return parse_config(file, data)


def load_factory(spec: CrewSpec) -> Callable[[dict[str, str]], Any]:
    """Import the crew's ``module:function`` factory.

    Lazy on purpose: importing a user's crew module imports crewai (seconds), and a broken
    module should fail the one crew that uses it, not the whole configuration.

    Raises:
        ConfigError: The factory string is malformed, its module cannot be imported (the
            import's own error is included), the attribute is missing, or it is not callable.
    """
    where = f'{spec.key}.factory: "{spec.factory}"'
    if not FACTORY_RE.fullmatch(spec.factory):
        raise ConfigError(f'{where}: expected "module:function", e.g. "my_crews.blog:build"')
    module_name, _, attr_path = spec.factory.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and _is_module_or_parent(exc.name, module_name):
            raise ConfigError(
                f'{where}: no module named "{exc.name}" (is it installed, or on sys.path?)'
            ) from exc
        raise ConfigError(f'{where}: importing "{module_name}" failed: {exc}') from exc
    except Exception as exc:  # an import can raise anything; show it, crew by crew
        raise ConfigError(
            f'{where}: importing "{module_name}" failed: {type(exc).__name__}: {exc}'
        ) from exc
    target: Any = module
    parts = attr_path.split(".")
    for i, part in enumerate(parts):
        try:
            target = getattr(target, part)
        except AttributeError:
            missing = ".".join(parts[: i + 1])
            raise ConfigError(
                f'{where}: module "{module_name}" has no attribute "{missing}"'
            ) from None
    if not callable(target):
        raise ConfigError(f"{where}: not callable (it is a {type(target).__name__})")
    factory: Callable[[dict[str, str]], Any] = target
    return factory


def _is_module_or_parent(missing: str, module_name: str) -> bool:
    return module_name == missing or module_name.startswith(missing + ".")
