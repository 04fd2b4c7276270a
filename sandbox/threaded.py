"""A synchronous face for the stand-in, running its event loop in a background thread.

Why: our integration tests are synchronous (CrewAI and storage are sync), yet the
stand-in is an aiohttp server. This is the single sync/async boundary for tests: every
call is handed to the stand-in's loop with ``run_coroutine_threadsafe`` and waited for
with a deadline, and state is only ever read or changed on that loop, so there are no
races between the test thread and the server.

Example:
    >>> with StandInThread(SlackStandIn(signing_secret="s3cret")) as slack:  # doctest: +SKIP
    ...     slack.add_channel("C1", "reviews", ["UALICE"])
    ...     delivery = slack.slash_command("UALICE", "C1", "/crew", "run blog")
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from types import TracebackType
from typing import Any, TypeVar

from sandbox.calls import Call
from sandbox.delivery import Delivery
from sandbox.signing import Tamper
from sandbox.standin import SlackStandIn
from sandbox.web import SandboxPage
from sandbox.workspace import Ephemeral, StoredFile

__all__ = ["StandInThread"]

T = TypeVar("T")
Json = dict[str, Any]


class StandInThread:
    """Runs ``standin`` on its own loop in a daemon thread; use as a context manager.

    Args:
        standin: the stand-in to serve.
        host, port: where to listen (port 0 picks a free one).
        timeout: the longest any sync call may take before ``TimeoutError``.
        page: also serve the sandbox page (see ``SlackStandIn.start``).
    """

    def __init__(
        self,
        standin: SlackStandIn,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        timeout: float = 10.0,
        page: SandboxPage | None = None,
    ) -> None:
        self.standin = standin
        self._page = page
        self._host, self._port, self._timeout = host, port, timeout
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="slack-standin", daemon=True
        )

    def __enter__(self) -> StandInThread:
        self._thread.start()
        self._run(self.standin.start(self._host, self._port, page=self._page))
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            self._run(self.standin.stop())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(self._timeout)
            self._loop.close()

    def _run(self, awaitable: Awaitable[T], timeout: float | None = None) -> T:
        if threading.current_thread() is self._thread:
            if inspect.iscoroutine(awaitable):
                awaitable.close()
            raise RuntimeError("a blocking call from the stand-in's own loop would deadlock")

        async def wrapped() -> T:
            return await awaitable

        future = asyncio.run_coroutine_threadsafe(wrapped(), self._loop)
        return future.result(timeout or self._timeout)

    def _query(self, fn: Callable[[], T]) -> T:
        async def on_loop() -> T:
            return fn()

        return self._run(on_loop())

    # -- identity --------------------------------------------------------------------------

    @property
    def api_url(self) -> str:
        return self.standin.api_url

    @property
    def base_url(self) -> str:
        return self.standin.base_url

    @property
    def bot_endpoint(self) -> str:
        return self.standin.bot_endpoint

    @bot_endpoint.setter
    def bot_endpoint(self, url: str) -> None:
        self.standin.bot_endpoint = url

    # -- seeding, faults, queries ----------------------------------------------------------

    def add_channel(
        self, channel_id: str, name: str, members: list[str], *, bot_is_member: bool = True
    ) -> None:
        self._query(
            lambda: self.standin.add_channel(channel_id, name, members, bot_is_member=bot_is_member)
        )

    def add_user(
        self, user_id: str, name: str, real_name: str | None = None, **traits: bool
    ) -> None:
        self._query(lambda: self.standin.add_user(user_id, name, real_name, **traits))

    def add_usergroup(self, group_id: str, members: list[str]) -> None:
        self._query(lambda: self.standin.add_usergroup(group_id, members))

    def archive_channel(self, channel_id: str) -> None:
        self._query(lambda: self.standin.archive_channel(channel_id))

    def revoke_token(self) -> None:
        self._query(self.standin.revoke_token)

    def fail_next(
        self,
        method: str,
        status: int = 429,
        retry_after: int = 1,
        times: int = 1,
        error: str | None = None,
        *,
        after_applying: bool = False,
        where: Callable[[Json], bool] | None = None,
    ) -> None:
        """See ``FaultPlan.fail_next``; ``where`` runs on the stand-in's loop."""
        self._query(
            lambda: self.standin.fail_next(
                method,
                status,
                retry_after,
                times,
                error,
                after_applying=after_applying,
                where=where,
            )
        )

    def calls(self, method: str | None = None) -> list[Call]:
        return self._query(lambda: self.standin.calls(method))

    def messages(self, channel: str) -> list[Json]:
        return self._query(lambda: self.standin.messages(channel))

    def thread(self, channel: str, ts: str) -> list[Json]:
        return self._query(lambda: self.standin.thread(channel, ts))

    def direct_messages(self, user: str) -> list[Json]:
        return self._query(lambda: self.standin.direct_messages(user))

    def latest_message(self, channel: str) -> Json | None:
        return self._query(lambda: self.standin.latest_message(channel))

    def ephemerals(self, user: str) -> list[Ephemeral]:
        return self._query(lambda: self.standin.ephemerals(user))

    def open_views(self, user: str | None = None) -> list[Json]:
        return self._query(lambda: self.standin.open_views(user))

    def home_view(self, user: str) -> Json | None:
        return self._query(lambda: self.standin.home_view(user))

    def files(self) -> list[StoredFile]:
        return self._query(lambda: self.standin.files())

    def wait_for(self, predicate: Callable[[], T | None], timeout: float = 5.0) -> T:
        """Block until ``predicate()`` returns something truthy, checking every 10 ms.

        The predicate runs in the calling thread, so it may use this wrapper's queries.
        """
        deadline = time.monotonic() + timeout
        while not (result := predicate()):
            if time.monotonic() > deadline:
                raise TimeoutError(f"condition not met within {timeout} s")
            time.sleep(0.01)
        return result

    def wait_for_call(self, method: str, count: int = 1, timeout: float = 5.0) -> Call:
        return self._run(self.standin.wait_for_call(method, count, timeout), timeout + 1)

    def wait_for_socket(self, timeout: float = 5.0) -> None:
        self._run(self.standin.wait_for_socket(timeout), timeout + 1)

    # -- person side -----------------------------------------------------------------------

    def slash_command(
        self, user: str, channel: str, command: str, text: str = "", *, tamper: Tamper = Tamper.NONE
    ) -> Delivery:
        return self._run(self.standin.slash_command(user, channel, command, text, tamper=tamper))

    def send_message(
        self,
        user: str,
        channel: str,
        text: str,
        *,
        thread_ts: str | None = None,
        tamper: Tamper = Tamper.NONE,
    ) -> Delivery:
        return self._run(
            self.standin.send_message(user, channel, text, thread_ts=thread_ts, tamper=tamper)
        )

    def reply_in_thread(
        self,
        user: str,
        channel: str,
        thread_ts: str,
        text: str,
        *,
        also_to_channel: bool = False,
        file_name: str | None = None,
        tamper: Tamper = Tamper.NONE,
    ) -> Delivery:
        return self._run(
            self.standin.reply_in_thread(
                user,
                channel,
                thread_ts,
                text,
                also_to_channel=also_to_channel,
                file_name=file_name,
                tamper=tamper,
            )
        )

    def mention_bot(
        self,
        user: str,
        channel: str,
        text: str,
        *,
        thread_ts: str | None = None,
        tamper: Tamper = Tamper.NONE,
    ) -> Delivery:
        return self._run(
            self.standin.mention_bot(user, channel, text, thread_ts=thread_ts, tamper=tamper)
        )

    def resend_as_message_event(self, channel: str, ts: str) -> Delivery:
        return self._run(self.standin.resend_as_message_event(channel, ts))

    def send_event(self, event: Json, *, tamper: Tamper = Tamper.NONE) -> Delivery:
        return self._run(self.standin.send_event(event, tamper=tamper))

    def open_home(self, user: str, *, tab: str = "home") -> Delivery:
        return self._run(self.standin.open_home(user, tab=tab))

    def click_button(
        self,
        user: str,
        channel: str,
        ts: str,
        action_id: str,
        *,
        block_id: str | None = None,
        value: str | None = None,
        tamper: Tamper = Tamper.NONE,
    ) -> Delivery:
        return self._run(
            self.standin.click_button(
                user, channel, ts, action_id, block_id=block_id, value=value, tamper=tamper
            )
        )

    def click_in_view(
        self,
        user: str,
        view_id: str,
        action_id: str,
        *,
        block_id: str | None = None,
        inputs: Mapping[str, Any] | None = None,
        tamper: Tamper = Tamper.NONE,
    ) -> Delivery:
        return self._run(
            self.standin.click_in_view(
                user, view_id, action_id, block_id=block_id, inputs=inputs, tamper=tamper
            )
        )

    def send_interaction(self, payload: Json, *, tamper: Tamper = Tamper.NONE) -> Delivery:
        return self._run(self.standin.send_interaction(payload, tamper=tamper))

    def submit_view(
        self,
        user: str,
        view_id: str,
        inputs: Mapping[str, Any] | None = None,
        *,
        tamper: Tamper = Tamper.NONE,
    ) -> Delivery:
        return self._run(self.standin.submit_view(user, view_id, inputs, tamper=tamper))

    def close_view(self, user: str, view_id: str) -> Delivery | None:
        return self._run(self.standin.close_view(user, view_id))

    def retry(self, delivery: Delivery, *, num: int = 1, reason: str = "http_timeout") -> Delivery:
        return self._run(self.standin.retry(delivery, num=num, reason=reason))
