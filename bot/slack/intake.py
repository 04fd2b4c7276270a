"""Slack's requests, recorded before they are acked and handled after, exactly once.

Slack wants an answer within 3 s, and an app that answers "200" has told the person their
click or command was taken. So a request is written to the inbox (``storage.inbox``) before
it is acked: a process killed a millisecond after the ack loses nothing, since the next one
finds the request unfinished and handles it. When the database cannot take it, the person
hears so (the transports decide how: an error status for a click, an ephemeral for a slash
command) instead of a silent success.

The path of one request, whatever its transport (``bot.hosting.http``, ``bot.hosting.socket_mode``):

1. :func:`classify`, pure and cheap (it runs before the ack): what kind of request it is
   and its key. The key deduplicates: for slash commands and clicks, their ``trigger_id``
   (``trigger:<id>``: Slack makes one per command typed or button clicked, so the same
   click sent again is one, even signed anew at another second), else what the transport
   gives (the signature over HTTP, so a request replayed byte for byte is one; the envelope
   id in Socket Mode); for messages ``msg:<channel>:<ts>`` (Slack's retries, and the
   ``app_mention``/``message`` twins of one message); ``event:<event_id>`` for other events.
   The body is recorded as it came and parsed (:func:`parse_body`) once it is acked.
2. :meth:`Intake.receive` hands it to the :class:`Recorder`, a thread that writes whatever is
   waiting in one transaction (a burst of requests shares one commit), and waits for that
   commit, at most ``record_timeout``.
3. Recorded: the transport acks, and the request is handled on the loop: Bolt runs its
   listener to the end (``process_before_response``), then the row is marked done. A handler
   that fails (the database went away meanwhile) leaves the row; its claim runs out and the
   recovery sweep handles it again. While a request is in hand its claim is renewed, so a slow
   handler's request is not taken by a sweep (this process's or another replica's) and handled
   twice. Handlers are idempotent by the key (the decision or run a request made is not made
   again by its replay). A fresh click's *early step* (``Intake(early=…)``: opening its
   modal, whose trigger_id lives 3 s) is taken in its task as soon as it is recorded, before
   its handling waits for the acks and the other clicks; a request the sweep hands back has
   none.

Requests whose ack carries the answer (modal submissions, URL verification) are not recorded:
they are handled before the ack, and what they change is committed before it.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import json
import logging
import queue
import re
import threading
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import unquote_plus

from slack_bolt.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from yarl import URL

from storage import InboxRequest, InboxStore, NewRequest

log = logging.getLogger(__name__)

Json = dict[str, Any]

REQUEST_KEY = "countersign_request"
"""Where a listener finds the request's key in Bolt's context (``context[REQUEST_KEY]``)."""

# Requests whose answer is in the ack itself: handled before it, never recorded.
_ANSWERED_IN_ACK = frozenset({"url_verification", "view_submission", "block_suggestion"})
_ANSWERED_IN_ACK_MARKERS = ("view_submission", "block_suggestion", "ssl_check=")
_JSON = "application/json"
# A form body's trigger_id: a slash command's field, or inside an interaction's URL-encoded
# payload, read as it came (decoding a click's body, the clicked message with it, costs more
# than recording it): ``"trigger_id":"…"`` encoded. Any text of the clicked message is
# escaped JSON (``\"trigger_id\"``), so it cannot fake one.
_TRIGGER_FIELD = re.compile(r"(?:^|&)trigger_id=([^&]+)")
_TRIGGER_IN_PAYLOAD = re.compile(r"%22trigger_id%22%3A(?:\+|%20)*%22([^%&+]+)%22", re.IGNORECASE)
# An interaction payload's ``"actions": [`` and the first ``"action_id": "…"`` after it,
# encoded alike.
_ACTIONS_IN_PAYLOAD = re.compile(r"%22actions%22%3A(?:\+|%20)*%5B", re.IGNORECASE)
_ACTION_ID_IN_PAYLOAD = re.compile(
    r"%22action_id%22%3A(?:\+|%20)*%22((?:[^%&+]|%3A)+)%22", re.IGNORECASE
)
MAX_ATTEMPTS = 5
# How long handling waits for the acks in progress to go out first (bounded: a steady
# stream of requests must not starve it), and how long no ack must have been in progress
# for the acks to count as out: a burst's requests arrive over tens of milliseconds on a
# loaded host, and handling that starts in a lull holds the loop from the rest (Bolt's
# dispatch costs several times an ack). A click's modal does not wait for either.
_ACKS_FIRST_FOR = 1.0
_QUIET_AFTER = 0.02
# How long other requests wait for the clicks in hand to be handled first (bounded likewise):
# a click's trigger_id dies 3 s after it, and the modal it opens needs it.
_CLICKS_FIRST_FOR = 1.0


EarlyStep = Callable[[str, str], Coroutine[Any, Any, None] | None]
"""What a fresh click (its trigger_id, the ``action_id`` clicked: :func:`clicked`) needs done
as soon as it is recorded, before its handling waits its turn (opening its modal, whose
trigger_id lives 3 s): a coroutine run at once in the click's own task, so what it leaves
in the task's context is its listener's; or None."""


class Kind(enum.Enum):
    """What a request is, as far as acking it goes."""

    SLASH_COMMAND = "slash_command"  # failure: an ephemeral saying so, in the ack
    INTERACTION = "interaction"  # failure: an error status, Slack shows it on the button
    EVENT = "event"  # failure: an error status, Slack retries
    ANSWERED_IN_ACK = "answered_in_ack"  # handled before the ack, not recorded


class Receipt(enum.Enum):
    RECORDED = "recorded"
    DUPLICATE = "duplicate"  # recorded before: a retry, a twin event or a replay
    FAILED = "failed"  # not recorded: the person must be told


@dataclass(frozen=True)
class SlackRequest:
    """A verified request: what it is, its dedupe key, and its body as it came."""

    kind: Kind
    key: str
    body: str
    content_type: str

    def payload(self) -> Json:
        return parse_body(self.body, self.content_type)


def parse_body(raw: str, content_type: str | None) -> Json:
    """A request body as Slack meant it: JSON, a form, or a form whose ``payload`` is JSON.

    Unlike Bolt's parser (slack_bolt/request/internals.py: any form body *containing* the
    word "payload" is taken for an interaction), only a form *field* named ``payload`` is,
    so ``/crew run writer topic=payloads`` stays a slash command.

    Raises:
        ValueError: the body is not what its type says.
    """
    if (content_type or "").startswith("application/json") or raw.lstrip().startswith("{"):
        parsed = json.loads(raw)
        if not isinstance(parsed, dict):
            raise ValueError("a JSON body that is not an object")
        return parsed
    form = _form(raw)
    if "payload" in form and "command" not in form:
        inner = json.loads(form["payload"])
        if not isinstance(inner, dict):
            raise ValueError("a payload that is not an object")
        return inner
    return form


def _form(raw: str) -> dict[str, str]:
    """A form body's fields, decoded as ``urllib.parse.parse_qsl`` (blank values kept, the
    last of a repeated name) by yarl's C unquoter: a click's body (the clicked message in
    hundreds of escapes) took ~250 µs of the loop in ``parse_qsl``, ~30 µs so."""
    return dict(URL.build(query_string=raw, encoded=True).query.items())


def clicked(body: str, content_type: str) -> tuple[str, str] | None:
    """A click's trigger_id and the ``action_id`` of what was clicked (its first action),
    read from its body as it came, without decoding it; None for anything else.

    A form body is searched for the payload's top-level ``"actions": [`` (the clicked
    message's blocks have no such key, and any text in them is escaped JSON, ``\\"``), then
    the first ``action_id`` after it; a JSON body (Socket Mode) is parsed.
    """
    if content_type.startswith("application/json") or body.lstrip().startswith("{"):
        try:
            payload = parse_body(body, content_type)
            trigger, action = payload["trigger_id"], payload["actions"][0]["action_id"]
        except (ValueError, LookupError, TypeError):
            return None
        return (trigger, action) if isinstance(trigger, str) and isinstance(action, str) else None
    trigger = _TRIGGER_IN_PAYLOAD.search(body)
    actions = _ACTIONS_IN_PAYLOAD.search(body)
    action = _ACTION_ID_IN_PAYLOAD.search(body, actions.end()) if actions else None
    if trigger is None or action is None:
        return None
    return trigger.group(1), unquote_plus(action.group(1))


def classify(body: str, content_type: str, fallback_key: str) -> SlackRequest:
    """Kind and dedupe key of a request, looking no further into it than needed.

    Runs before the ack, for every request of a burst: a click's form body (several
    kilobytes: the clicked message comes with it) is not parsed here, only a JSON body (an
    event, whose key is inside). ``fallback_key`` is what the transport gives: the signature
    (HTTP) or the envelope id (Socket Mode).

    Raises:
        ValueError: a JSON body that is not a JSON object.
    """
    if content_type.startswith("application/json") or body.lstrip().startswith("{"):
        return classify_payload(parse_body(body, content_type), fallback_key)
    if any([marker in body for marker in _ANSWERED_IN_ACK_MARKERS]):  # no generator
        # Its answer is in the ack, so it is parsed now anyway (a marker in some other
        # request's text only costs that request a parse).
        request = classify_payload(parse_body(body, content_type), fallback_key)
        return SlackRequest(request.kind, request.key, body, content_type)
    if body.startswith("payload=") or "&payload=" in body:
        found = _TRIGGER_IN_PAYLOAD.search(body)
        key = _trigger_key(found.group(1) if found else None, fallback_key)
        return SlackRequest(Kind.INTERACTION, key, body, content_type)
    found = _TRIGGER_FIELD.search(body)
    key = _trigger_key(unquote_plus(found.group(1)) if found else None, fallback_key)
    return SlackRequest(Kind.SLASH_COMMAND, key, body, content_type)


def _trigger_key(trigger_id: Any, fallback_key: str) -> str:
    """``trigger:<id>`` for a command or a click that has one, else the transport's key."""
    return f"trigger:{trigger_id}" if isinstance(trigger_id, str) and trigger_id else fallback_key


def classify_payload(payload: Json, fallback_key: str) -> SlackRequest:
    """:func:`classify` for a payload already parsed (Socket Mode delivers them so)."""
    body = json.dumps(payload)
    kind_of = str(payload.get("type", ""))
    if "command" in payload:
        key = _trigger_key(payload.get("trigger_id"), fallback_key)
        return SlackRequest(Kind.SLASH_COMMAND, key, body, _JSON)
    if kind_of == "event_callback":
        event = payload.get("event")
        channel, ts = (
            (event.get("channel"), event.get("ts")) if isinstance(event, dict) else (None, None)
        )
        if isinstance(channel, str) and isinstance(ts, str):
            key = f"msg:{channel}:{ts}"
        else:
            key = f"event:{payload.get('event_id') or fallback_key}"
        return SlackRequest(Kind.EVENT, key, body, _JSON)
    if kind_of in _ANSWERED_IN_ACK or "ssl_check" in payload or not kind_of:
        return SlackRequest(Kind.ANSWERED_IN_ACK, fallback_key, body, _JSON)
    return SlackRequest(
        Kind.INTERACTION, _trigger_key(payload.get("trigger_id"), fallback_key), body, _JSON
    )


def bolt_request(payload: Json, key: str | None = None) -> AsyncBoltRequest:
    """A Bolt request for an already verified and parsed payload.

    ``mode="socket_mode"`` is how Bolt takes a parsed body: it then neither parses it again
    (see :func:`parse_body`) nor checks a signature, which the transport checked on arrival
    (a request handled after a restart is older than Bolt's five-minute window).
    """
    context = {REQUEST_KEY: key} if key is not None else None
    return AsyncBoltRequest(body=payload, mode="socket_mode", context=context)


class Recorder:
    """One thread writing to the inbox: what waits is written in one transaction.

    A burst of requests costs a few commits instead of one each, and the event loop never
    blocks on the database. Marks of finished requests ride along in the same commits. What
    the loop hands over in one of its passes goes to the thread at once, as one item: a
    handover per request woke the thread (and took the GIL from the loop) 200 times a burst.
    """

    def __init__(self, inbox: InboxStore, max_batch: int = 500, timeout: float = 2.0) -> None:
        self.inbox = inbox
        self.max_batch = max_batch
        self.timeout = timeout
        self._queue: queue.SimpleQueue[list[_Job] | None] = queue.SimpleQueue()
        self._waiting: list[_Job] = []  # handed over in this pass of the loop
        self._thread = threading.Thread(target=self._main, name="inbox-recorder", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Write what is queued, then stop (after :meth:`hand_over`, on the loop)."""
        self._queue.put(None)
        self._thread.join(30)

    def hand_over(self) -> None:
        """What the loop handed over so far, to the thread (on the loop); the requests among
        it time out together (one timer, not one each)."""
        if self._waiting:
            jobs, self._waiting = self._waiting, []
            self._queue.put(jobs)
            if any(job.future is not None for job in jobs):
                asyncio.get_running_loop().call_later(self.timeout, _expire, jobs)

    def _add(self, job: _Job) -> None:
        """``job`` to the thread at the end of this pass of the loop (on the loop)."""
        if not self._waiting:
            asyncio.get_running_loop().call_soon(self.hand_over)
        self._waiting.append(job)

    async def record(self, request: NewRequest) -> int | None:
        """The inbox row id once committed; None for a duplicate.

        Raises:
            TimeoutError: not committed within ``timeout`` (it is not handled if it is
                committed later).
            Exception: the write failed (whatever the database said).
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[int | None] = loop.create_future()
        self._add(_Job(request, None, future, loop))
        return await future

    def finish(self, row_id: int, error: str | None = None) -> None:
        """Mark a row handled (or given up, with ``error``) in the next commit (on the loop)."""
        self._add(_Job(None, (row_id, error), None, None))

    def _main(self) -> None:
        stopping = False
        while not stopping:
            first = self._queue.get()
            jobs = [] if first is None else first
            stopping = first is None
            while not stopping and len(jobs) < self.max_batch:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stopping = True
                else:
                    jobs += more
            if jobs:
                self._write(jobs)

    def _write(self, jobs: list[_Job]) -> None:
        # A waiter that gave up (the transport answered "not recorded") must not be recorded.
        recording = [j for j in jobs if j.request is not None and not _gave_up(j)]
        finished = [j.finished for j in jobs if j.finished is not None]
        try:
            ids = self.inbox.record([j.request for j in recording if j.request], finished)
        except Exception as exc:
            log.warning("inbox: could not record %d request(s): %s", len(recording), _brief(exc))
            self._answer([(job, None) for job in recording], exc)
            return
        self._answer(list(zip(recording, ids, strict=True)), None)

    def _answer(self, answers: list[tuple[_Job, int | None]], exc: Exception | None) -> None:
        """Hand each waiter its row id (or the failure): one wake-up of the loop per batch."""
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[_Job, int | None]]] = {}
        for job, row_id in answers:
            if job.loop is not None:
                by_loop.setdefault(job.loop, []).append((job, row_id))
        for loop, mine in by_loop.items():
            loop.call_soon_threadsafe(self._settle, mine, exc)

    def _settle(self, answers: list[tuple[_Job, int | None]], exc: Exception | None) -> None:
        for job, row_id in answers:
            if job.future is None:
                continue
            if job.future.done():
                # The person was told "not recorded" before this commit: never handle it.
                if row_id is not None and exc is None:
                    self.finish(row_id, "not recorded in time; the person was told to try again")
            elif exc is not None:
                job.future.set_exception(exc)
            else:
                job.future.set_result(row_id)


def _expire(jobs: list[_Job]) -> None:
    """The requests of ``jobs`` not committed yet time out (on the loop)."""
    for job in jobs:
        if job.future is not None and not job.future.done():
            job.future.set_exception(TimeoutError())


def _gave_up(job: _Job) -> bool:
    return job.future is not None and job.future.done()


@dataclass
class _Job:
    request: NewRequest | None
    finished: tuple[int, str | None] | None
    future: asyncio.Future[int | None] | None
    loop: asyncio.AbstractEventLoop | None


class Intake:
    """Receives verified requests for the transports, and handles what was recorded.

    Args:
        app: the Bolt app whose listeners handle requests (``process_before_response=True``,
            so a dispatch returns once the listener is done and says whether it failed).
        inbox: the inbox storage; its ``claim`` is how long a handler holds a request.
        record_timeout: how long an ack may wait for the database before the person is told
            the request was not recorded (Slack gives up at 3 s).
        concurrency: requests handled at once.
        early: a fresh click's first step (:data:`EarlyStep`), taken as soon as it is
            recorded, ahead of the acks still going out and the requests in hand.
    """

    def __init__(
        self,
        app: AsyncApp,
        inbox: InboxStore,
        *,
        record_timeout: float = 2.0,
        concurrency: int = 64,
        early: EarlyStep | None = None,
    ) -> None:
        self.app = app
        self.early = early
        self.inbox = inbox
        self.record_timeout = record_timeout
        self.recorder = Recorder(inbox, timeout=record_timeout)
        self._slots = asyncio.Semaphore(concurrency)
        self._receiving = 0
        self._quiet = asyncio.Event()
        self._quiet.set()
        self._last_ack = 0.0  # the loop's time when the last ack in progress went out
        self._quiet_check: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._in_hand: set[int] = set()  # rows being handled here, their claims renewed
        self._clicks = 0  # clicks (trigger-bearing interactions) in hand, handled first
        self._no_clicks = asyncio.Event()
        self._no_clicks.set()
        self._sweeper: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    def start(self) -> None:
        """Start the recorder and the sweep that handles requests left by a dead process."""
        self._stop.clear()
        self.recorder.start()
        self._sweeper = asyncio.create_task(self._sweep())

    async def stop(self, timeout: float = 10.0) -> None:
        """Let the requests in hand finish (bounded), their claims renewed meanwhile, then
        stop; what is left is in the inbox."""
        self._stop.set()
        if self._sweeper is not None:
            await self._sweeper  # it takes no more requests
        renewing = asyncio.create_task(self._keep_renewing())
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout)
        for task in self._tasks:
            task.cancel()
        renewing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await renewing
        self.recorder.hand_over()
        await asyncio.to_thread(self.recorder.stop)

    @contextlib.contextmanager
    def acking(self) -> Iterator[None]:
        """A request is on its way to its ack: handling waits for it (bounded). A transport
        says so from the moment it reads the request, so that a burst's first commit does not
        let handling take the loop from the requests still being read and checked."""
        self._receiving += 1
        self._quiet.clear()
        try:
            yield
        finally:
            self._receiving -= 1
            if self._receiving == 0:
                loop = asyncio.get_running_loop()
                self._last_ack = loop.time()
                if self._quiet_check is None:
                    self._quiet_check = loop.call_later(_QUIET_AFTER, self._check_quiet)

    def _check_quiet(self) -> None:
        """Quiet once no ack has been in progress for :data:`_QUIET_AFTER`."""
        self._quiet_check = None
        if self._receiving:
            return  # the last of those acks schedules the next check
        loop = asyncio.get_running_loop()
        left = self._last_ack + _QUIET_AFTER - loop.time()
        if left > 0:
            self._quiet_check = loop.call_later(left, self._check_quiet)
        else:
            self._quiet.set()

    async def receive(self, request: SlackRequest) -> Receipt:
        """Record ``request``; once recorded, handle it in the background."""
        try:
            with self.acking():
                row_id = await self.recorder.record(
                    NewRequest(request.key, request.body, request.content_type)
                )
        except TimeoutError:
            log.warning(
                "inbox: %s not recorded within %.1f s", request.kind.value, self.record_timeout
            )
            return Receipt.FAILED
        except Exception:  # logged by the recorder, once per batch
            return Receipt.FAILED
        if row_id is None:
            return Receipt.DUPLICATE
        recorded = InboxRequest(row_id, request.key, request.body, request.content_type, 1)
        self._handle_soon(recorded, first=request.kind is Kind.INTERACTION)
        return Receipt.RECORDED

    async def answer_now(self, request: SlackRequest) -> BoltResponse:
        """Handle a request whose ack carries the answer (modal submissions): not recorded."""
        return await self.app.async_dispatch(bolt_request(request.payload()))

    def _handle_soon(self, request: InboxRequest, *, first: bool = False) -> None:
        """Handle ``request`` in the background; ``first``: a fresh click, whose trigger_id
        a modal may need within 3 s, so other requests wait for it (bounded)."""
        self._in_hand.add(request.id)
        if first:
            self._clicks += 1
            self._no_clicks.clear()
        task = asyncio.create_task(self._handle(request, first))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _handle(self, request: InboxRequest, first: bool) -> None:
        try:
            await self._dispatch(request, first)
        finally:
            self._in_hand.discard(request.id)
            if first:
                self._clicks -= 1
                if self._clicks == 0:
                    self._no_clicks.set()

    async def _dispatch(self, request: InboxRequest, first: bool) -> None:
        # A fresh click's first step (its modal) is taken now, ahead of everything.
        what = clicked(request.body, request.content_type) if first and self.early else None
        if what is not None and self.early is not None and (step := self.early(*what)):
            await step
        # Acks first: in a burst, handling the first requests (Bolt's middleware and the
        # listener's own work) would hold the loop while the others wait for their ack.
        # Then the clicks, whose modals must open while their trigger lives.
        await _until(self._quiet, _ACKS_FIRST_FOR)
        if not first:
            await _until(self._no_clicks, _CLICKS_FIRST_FOR)
        async with self._slots:
            try:
                payload = parse_body(request.body, request.content_type)
                response = await self.app.async_dispatch(bolt_request(payload, request.key))
                status = response.status
            except ValueError:  # signed, yet not what its type says: nothing to handle
                log.warning("inbox %d: its body cannot be parsed; dropped", request.id)
                status = 400
            except Exception:
                log.exception("inbox %d: handling failed", request.id)
                status = 500
        if status < 500:
            self.recorder.finish(request.id)
        elif request.attempts >= MAX_ATTEMPTS:
            log.error("inbox %d: gave up after %d attempts", request.id, request.attempts)
            self.recorder.finish(request.id, f"gave up after {request.attempts} attempts")
        else:  # its claim runs out and the sweep tries again
            log.warning("inbox %d: handling failed (attempt %d)", request.id, request.attempts)

    def _every(self) -> float:
        """How often claims are renewed and the sweep runs: a third of a claim."""
        return max(self.inbox.claim.total_seconds() / 3, 0.05)

    async def _sweep(self) -> None:
        """Renew the claims of the requests in hand, then handle requests whose handler
        died (a crash after the ack), here or in another replica; until stopped."""
        while not self._stop.is_set():
            stale = []
            if await self._renew():
                try:
                    stale = await asyncio.to_thread(self.inbox.claim_stale)
                except Exception as exc:
                    log.warning("inbox: sweep failed: %s", _brief(exc))
            for request in stale:
                log.info("inbox %d: handling a request left unfinished", request.id)
                self._handle_soon(request)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self._every())

    async def _keep_renewing(self) -> None:
        """Stopping: renew the claims of the requests still in hand until cancelled."""
        while True:
            await asyncio.sleep(self._every())
            await self._renew()

    async def _renew(self) -> bool:
        """Renew the claims of the requests in hand; False (logged) if the database failed."""
        try:
            await asyncio.to_thread(self.inbox.renew, set(self._in_hand))
        except Exception as exc:
            log.warning("inbox: sweep failed: %s", _brief(exc))
            return False
        return True

    async def forget(self, older_than: timedelta = timedelta(hours=1)) -> int:
        """Drop requests handled long ago (Slack never replays past five minutes)."""
        return await asyncio.to_thread(self.inbox.forget, older_than)


async def _until(event: asyncio.Event, timeout: float) -> None:
    """Wait for ``event``, at most ``timeout`` (no task made when it is set already)."""
    if not event.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout)


def _brief(exc: BaseException) -> str:
    """One line about a database error: its type and first line, never a traceback."""
    first = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {first[0] if first else ''}"[:300]
