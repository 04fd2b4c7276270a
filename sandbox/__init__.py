"""A local stand-in for Slack, for end-to-end tests and the offline sandbox.

It plays Slack at the network boundary: a stateful Web API that validates Block Kit like
Slack, injects rate limits and server errors on demand, and acts as people who send
correctly signed slash commands, clicks, modal submissions and messages to the bot's real
endpoint (HTTP or Socket Mode). See ``standin.py`` for the routes. Why: tests replace
Slack at the network boundary only, so what passes here is what Slack would accept.

Modules: ``blockkit`` (pure validation), ``workspace`` (state), ``webapi`` (methods),
``calls`` (call log, faults), ``signing``, ``payloads`` (what Slack sends), ``delivery``
(HTTP and Socket Mode transport), ``socket_mode``, ``person`` (people's actions),
``standin`` (the server), ``threaded`` (the synchronous wrapper), ``errors``, ``web``
and ``pagestate`` (a web page playing a Slack channel, for the offline sandbox; its
script and style are in ``page/``).
"""

from sandbox.blockkit import Problem, validate_blocks, validate_view
from sandbox.calls import Call
from sandbox.delivery import Delivery
from sandbox.errors import PersonActionRefused, SandboxError, SlackApiFailure
from sandbox.signing import Tamper, sign
from sandbox.standin import SlackStandIn
from sandbox.threaded import StandInThread
from sandbox.web import SandboxPage
from sandbox.workspace import Ephemeral, StoredFile

__all__ = [
    "Call",
    "Delivery",
    "Ephemeral",
    "PersonActionRefused",
    "Problem",
    "SandboxError",
    "SandboxPage",
    "SlackApiFailure",
    "SlackStandIn",
    "StandInThread",
    "StoredFile",
    "Tamper",
    "sign",
    "validate_blocks",
    "validate_view",
]
