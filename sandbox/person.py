"""What a simulated person can do in Slack, and how Slack reacts to the bot's answers.

Why: end-to-end tests act as reviewers. Each action is refused (``PersonActionRefused``)
when Slack's client would not offer it: clicking a button the bot never posted,
submitting a modal that is not open, replying to a thread that does not exist. What the
bot answers is then applied the way Slack applies it: a slash command's response body
becomes an ephemeral message, a view_submission's ``response_action`` keeps, updates,
pushes or closes the modal.
"""

from __future__ import annotations

import copy
import secrets
from collections.abc import Mapping
from typing import Any

from sandbox import payloads
from sandbox.blockkit import validate_blocks, validate_view
from sandbox.delivery import Delivery, Kind, Sender
from sandbox.errors import MessageChanged, PersonActionRefused, SlackApiFailure
from sandbox.scopes import Grants, event_subscription
from sandbox.signing import Tamper
from sandbox.workspace import (
    Channel,
    Ephemeral,
    ResponseUrl,
    StoredFile,
    StoredView,
    Workspace,
)

__all__ = ["PersonSide"]

Json = dict[str, Any]


class PersonSide:
    """Person-side actions of ``SlackStandIn`` (a mixin; the stand-in provides the state)."""

    workspace: Workspace
    _sender: Sender
    grants: Grants  # the manifest's scopes and events: an event not subscribed is not sent
    should_escape: bool  # the /crew command's manifest setting: how its text is sent

    def _root_url(self) -> str:
        raise NotImplementedError

    async def _changed(self) -> None:
        raise NotImplementedError

    # -- helpers ---------------------------------------------------------------------------

    def _seen_channel(self, user: str, channel_id: str) -> Channel:
        try:
            self.workspace.user(user)
            channel = self.workspace.channel(channel_id)
        except SlackApiFailure as error:
            raise PersonActionRefused(f"{error.code}: {user} in {channel_id}") from None
        if channel.is_private and user not in channel.members:
            raise PersonActionRefused(f"{user} cannot see {channel_id}")
        return channel

    def _response_url(self, user: str, channel: str, **where: Any) -> str:
        record = ResponseUrl(secrets.token_hex(8), user, channel, self.workspace.clock(), **where)
        return self.workspace.issue_response_url(self._root_url(), record)

    async def _send(self, kind: Kind, payload: Json, tamper: Tamper) -> Delivery:
        delivery = await self._sender.send(kind, payload, tamper=tamper)
        await self._changed()
        return delivery

    async def retry(
        self, delivery: Delivery, *, num: int = 1, reason: str = "http_timeout"
    ) -> Delivery:
        """Send ``delivery``'s payload again as Slack's retry ``num`` (same ``event_id``)."""
        return await self._sender.send(
            delivery.kind, delivery.payload, retry_num=num, retry_reason=reason
        )

    # -- slash commands --------------------------------------------------------------------

    async def slash_command(
        self,
        user: str,
        channel: str,
        command: str,
        text: str = "",
        *,
        tamper: Tamper = Tamper.NONE,
    ) -> Delivery:
        """Type ``/command text`` in ``channel``; a 200 body is shown as Slack shows it.

        ``text`` is what the person types; it is sent escaped as Slack escapes it
        (``payloads.escape_command``)."""
        where = self._seen_channel(user, channel)
        form = payloads.slash_command(
            self.workspace,
            user=user,
            channel=where,
            command=command,
            text=payloads.escape_command(self.workspace, text, should_escape=self.should_escape),
            response_url=self._response_url(user, where.id),
            trigger_id=self.workspace.issue_trigger(user),
        )
        delivery = await self._send("slash_commands", form, tamper)
        if delivery.ok and delivery.body:
            self._show_command_reply(user, where, delivery)
        return delivery

    def _show_command_reply(self, user: str, channel: Channel, delivery: Delivery) -> None:
        reply: Json = delivery.json if isinstance(delivery.json, dict) else {"text": delivery.body}
        blocks: list[Json] = reply.get("blocks") or []
        problems = validate_blocks(blocks) if blocks else []
        delivery.problems.extend(p.slack_line() for p in problems)
        if problems:
            return
        if reply.get("response_type") == "in_channel":
            fields = {"text": reply.get("text", ""), "blocks": blocks}
            self.workspace.post(channel, self.workspace.bot_user_id, fields)
        else:
            ts = self.workspace.next_ts()
            self.workspace.ephemerals.append(
                Ephemeral(user, channel.id, ts, str(reply.get("text", "")), blocks)
            )

    async def slack_says(
        self, user: str, channel: str, text: str, *, thread_ts: str | None = None
    ) -> Ephemeral:
        """Show ``user`` a note from Slack itself, e.g. ``/crew failed with the error ...``.

        Slack's client says so when an app did not answer a slash command; the sandbox
        page does the same. Only ``user`` sees it, like any ephemeral message.
        """
        where = self._seen_channel(user, channel)
        note = Ephemeral(user, where.id, self.workspace.next_ts(), text, [], thread_ts, True)
        self.workspace.ephemerals.append(note)
        await self._changed()
        return note

    # -- messages --------------------------------------------------------------------------

    async def send_message(
        self,
        user: str,
        channel: str,
        text: str,
        *,
        thread_ts: str | None = None,
        tamper: Tamper = Tamper.NONE,
    ) -> Delivery:
        """Post ``text`` (in a thread with ``thread_ts``) and deliver the ``message`` event."""
        where = self._seen_channel(user, channel)
        try:
            message = self.workspace.post(
                where, user, payloads.human_message(self.workspace, text), thread_ts=thread_ts
            )
        except SlackApiFailure as error:
            raise PersonActionRefused(f"{error.code}: {channel} {thread_ts}") from None
        return await self.send_event(payloads.message_event(where, message), tamper=tamper)

    async def reply_in_thread(
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
        """A threaded reply: the way reviewers give free-text feedback.

        ``also_to_channel`` ticks Slack's "Also send to #channel" (the event's subtype is
        ``thread_broadcast``); ``file_name`` attaches a file, a screenshot say (``file_share``).
        """
        if not (also_to_channel or file_name):
            return await self.send_message(user, channel, text, thread_ts=thread_ts, tamper=tamper)
        where = self._seen_channel(user, channel)
        fields = payloads.human_message(self.workspace, text)
        if also_to_channel:
            fields.update(subtype="thread_broadcast", root={"ts": thread_ts})
        if file_name:
            file_id = self.workspace.new_id("F")
            self.workspace.files[file_id] = StoredFile(file_id, file_name, 0, b"", file_name)
            shared = {"id": file_id, "name": file_name, "title": file_name, "user": user}
            fields.update(subtype="file_share", files=[shared], upload=True)
        try:
            message = self.workspace.post(where, user, fields, thread_ts=thread_ts)
        except SlackApiFailure as error:
            raise PersonActionRefused(f"{error.code}: {channel} {thread_ts}") from None
        return await self.send_event(payloads.message_event(where, message), tamper=tamper)

    async def mention_bot(
        self,
        user: str,
        channel: str,
        text: str,
        *,
        thread_ts: str | None = None,
        tamper: Tamper = Tamper.NONE,
    ) -> Delivery:
        """Post a message mentioning the bot and deliver its ``app_mention`` event.

        Slack also delivers a ``message`` event for the same ts; send it with
        ``resend_as_message_event`` to test the bot's dedupe of the twins.
        """
        where = self._seen_channel(user, channel)
        mention = f"<@{self.workspace.bot_user_id}>"
        body = text if mention in text else f"{mention} {text}"
        try:
            message = self.workspace.post(
                where, user, payloads.human_message(self.workspace, body), thread_ts=thread_ts
            )
        except SlackApiFailure as error:
            raise PersonActionRefused(f"{error.code}: {channel} {thread_ts}") from None
        return await self.send_event(
            payloads.message_event(where, message, "app_mention"), tamper=tamper
        )

    async def resend_as_message_event(self, channel: str, ts: str) -> Delivery:
        """The ``message`` event of a stored message, with a new ``event_id``."""
        where = self.workspace.channel(channel)
        try:
            message = self.workspace.message(where.id, ts)
        except SlackApiFailure:
            raise PersonActionRefused(f"no message {ts} in {channel}") from None
        return await self.send_event(payloads.message_event(where, message))

    async def send_event(self, event: Json, *, tamper: Tamper = Tamper.NONE) -> Delivery:
        """Deliver any event in an ``event_callback`` envelope with a fresh ``event_id``;
        one the app does not subscribe to is not sent, as Slack sends it not (the delivery
        says so in ``unsubscribed``, and is not ``ok``)."""
        event_id = f"Ev{secrets.token_hex(5).upper()}"
        envelope = payloads.event_callback(
            self.workspace, event, event_id, int(self.workspace.clock())
        )
        subscription = event_subscription(event)
        if subscription not in self.grants.events:
            await self._changed()
            transport = self._sender.transport
            return Delivery(
                transport, "events_api", 0, "", None, 0.0, envelope, unsubscribed=subscription
            )
        return await self._send("events_api", envelope, tamper)

    async def open_home(self, user: str, *, tab: str = "home") -> Delivery:
        """``user`` opens the app's Home (its ``tab``): the ``app_home_opened`` event."""
        try:
            self.workspace.user(user)
        except SlackApiFailure:
            raise PersonActionRefused(f"no user {user}") from None
        return await self.send_event(payloads.app_home_opened(self.workspace, user, tab))

    # -- interactivity ---------------------------------------------------------------------

    async def click_button(
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
        """Click the button ``action_id`` on the message ``ts`` the bot posted in ``channel``.

        Also picks ``value`` in a static_select/overflow/radio_buttons element. Ephemeral
        messages are found among those ``user`` received.

        Raises:
            PersonActionRefused: the message or the element is not there.
        """
        where = self._seen_channel(user, channel)
        message = self.workspace.messages.get(where.id, {}).get(ts)
        ephemeral = next(
            (
                e
                for e in self.workspace.ephemerals
                if e.user == user and e.channel == where.id and e.ts == ts
            ),
            None,
        )
        if message is None and ephemeral is None:
            raise MessageChanged(f"no message {ts} in {channel} for {user}")
        blocks = message["blocks"] if message else ephemeral.blocks if ephemeral else []
        block, element = payloads.find_element(blocks, action_id, block_id)
        thread_ts = (message or {}).get("thread_ts") or (ephemeral.thread_ts if ephemeral else None)
        trigger_id = self.workspace.issue_trigger(user)
        payload = payloads.interaction_base(self.workspace, "block_actions", user, trigger_id)
        container: Json = {
            "type": "message",
            "message_ts": ts,
            "channel_id": where.id,
            "is_ephemeral": message is None,
        }
        if thread_ts:
            container["thread_ts"] = thread_ts
        payload.update(
            container=container, channel={"id": where.id, "name": where.name}, state={"values": {}}
        )
        if message is not None:
            payload["message"] = copy.deepcopy(message)
        payload["response_url"] = self._response_url(
            user, where.id, thread_ts=thread_ts, message_ts=ts, is_ephemeral=message is None
        )
        action_ts = self.workspace.next_ts()
        payload["actions"] = [payloads.action(block, element, action_ts, value)]
        return await self._send("interactive", payload, tamper)

    async def click_in_view(
        self,
        user: str,
        view_id: str,
        action_id: str,
        *,
        block_id: str | None = None,
        inputs: Mapping[str, Any] | None = None,
        tamper: Tamper = Tamper.NONE,
    ) -> Delivery:
        """Click the button ``action_id`` in a view: ``user``'s Home tab, or the modal on
        top of their stack (its inputs as ``inputs`` fill them, see ``payloads.view_state``;
        left alone, as the bot set them). The ``block_actions`` payload carries the view, its
        state included, as Slack sends it, and no channel.

        Raises:
            PersonActionRefused: no such view of theirs open, or no such button in it.
        """
        home = self.workspace.home_view(user)
        stored = home if home is not None and home.id == view_id else self._top_view(user, view_id)
        block, element = payloads.find_element(stored.view.get("blocks"), action_id, block_id)
        if element.get("type") != "button":
            raise PersonActionRefused(f"{action_id!r} is a {element.get('type')}, not a button")
        view = copy.deepcopy(stored.view)
        view["state"] = payloads.view_state(view, inputs or {})
        trigger_id = self.workspace.issue_trigger(user)
        payload = payloads.interaction_base(self.workspace, "block_actions", user, trigger_id)
        payload.update(
            container={"type": "view", "view_id": view_id},
            view=view,
            state=view["state"],
            actions=[payloads.action(block, element, self.workspace.next_ts(), None)],
        )
        return await self._send("interactive", payload, tamper)

    async def send_interaction(self, payload: Json, *, tamper: Tamper = Tamper.NONE) -> Delivery:
        """Deliver an interactivity payload as given, signed as Slack signs it.

        For tests of what the bot does with a payload Slack's client would never send, such
        as a click whose button value was changed; everything else goes through the actions
        above, which Slack's client would offer. Like every interaction Slack sends, it gets
        a trigger_id of its own (a copy of an earlier click's payload is a new request).
        """
        user = payload.get("user")
        if isinstance(user, dict) and isinstance(user.get("id"), str) and "trigger_id" in payload:
            payload = {**payload, "trigger_id": self.workspace.issue_trigger(user["id"])}
        return await self._send("interactive", payload, tamper)

    def _top_view(self, user: str, view_id: str) -> StoredView:
        stored = self.workspace.views.get(view_id)
        if stored is None or not stored.is_open or stored.user != user:
            raise PersonActionRefused(f"{user} has no open modal {view_id}")
        stack = [
            v
            for v in self.workspace.views.values()
            if v.is_open and v.view["root_view_id"] == stored.view["root_view_id"]
        ]
        if stack[-1] is not stored:
            raise PersonActionRefused(f"modal {view_id} is under {stack[-1].id}")
        return stored

    async def submit_view(
        self,
        user: str,
        view_id: str,
        inputs: Mapping[str, Any] | None = None,
        *,
        tamper: Tamper = Tamper.NONE,
    ) -> Delivery:
        """Fill the open modal ``view_id`` with ``inputs`` and press its submit button.

        ``inputs`` are keyed by ``block_id`` (or ``action_id``); see ``payloads.view_state``.
        The bot's ``response_action`` is applied: none closes the modal, ``errors`` keeps
        it open, ``update``/``push`` change it, ``clear`` closes the whole stack.
        """
        stored = self._top_view(user, view_id)
        if "submit" not in stored.view:
            raise PersonActionRefused(f"modal {view_id} has no submit button")
        view = copy.deepcopy(stored.view)
        view["state"] = payloads.view_state(view, inputs or {})
        payload = payloads.interaction_base(
            self.workspace, "view_submission", user, self.workspace.issue_trigger(user)
        )
        payload.update(view=view, response_urls=[])
        delivery = await self._send("interactive", payload, tamper)
        if delivery.ok:
            self._apply_response_action(stored, delivery)
        await self._changed()
        return delivery

    async def close_view(self, user: str, view_id: str) -> Delivery | None:
        """Press the modal's close button; ``view_closed`` is sent if the bot asked."""
        stored = self._top_view(user, view_id)
        self.workspace.close_view(stored)
        await self._changed()
        if not stored.view.get("notify_on_close"):
            return None
        payload = payloads.interaction_base(
            self.workspace, "view_closed", user, self.workspace.issue_trigger(user)
        )
        payload.update(view=copy.deepcopy(stored.view), is_cleared=False)
        return await self._send("interactive", payload, Tamper.NONE)

    def _apply_response_action(self, stored: StoredView, delivery: Delivery) -> None:
        answer = delivery.json if isinstance(delivery.json, dict) else {}
        action = answer.get("response_action")
        if not delivery.body.strip() or action is None:
            self.workspace.close_view(stored)
        elif action == "errors":
            inputs = {
                b.get("block_id") for b in stored.view.get("blocks", []) if b.get("type") == "input"
            }
            errors = answer.get("errors")
            for block_id in errors if isinstance(errors, dict) else {None: None}:
                if block_id not in inputs:
                    delivery.problems.append(f"errors names {block_id!r}, not an input block")
        elif action in ("update", "push"):
            problems = validate_view(answer.get("view"))
            delivery.problems.extend(p.slack_line() for p in problems)
            if not problems and action == "update":
                self.workspace.replace_view(stored, answer["view"])
            elif not problems:
                self.workspace.open_view(stored.user, answer["view"], previous=stored)
        elif action == "clear":
            self.workspace.close_view(stored, whole_stack=True)
        else:
            delivery.problems.append(f"unknown response_action {action!r}")
