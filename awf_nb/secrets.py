"""Secret masking: replace secret values by `***` in text, data and live streams.

A value is secret when the input or environment variable holding it has a secret-looking
name (`is_secret_name`), when an input says `secret: true`, or when it is given explicitly
(an API key or a header value in provider options).

The naming rule works on words: a name is split at `_`, `-`, `.`, spaces and lower-to-upper
case changes (`dbPassword` is `db password`), and it is secret when one of its words is
`secret`, `password`, `passwd`, `passphrase`, `token`, `apikey`, `credential(s)` or
`privatekey`, when its last word is `key` (`OPENAI_KEY`, `ssh-key`), or when it has the
words `api key` (`API_KEY_OPENAI`). So
`GITHUB_TOKEN`, `db-password` and `apiKey` are secret, while `max_tokens`, `tokenizer`,
`SECRETARY` and `KEYS_DIR` are not.
`Masker` masks whole texts and nested data (state, transcript records, history rows);
`StreamMasker` masks a stream of chunks (LLM deltas, command output) where a secret can
arrive split across any number of chunks.

What gets masked: every character that lies inside an occurrence of any secret. Occurrences
that overlap form one masked run shown as a single `***`; occurrences that merely touch
stay separate (`***` `***`). This is stricter than replacing secrets one after the other
(even longest first): with secrets `abc` and `bcdefg`, the text `abcdefg` must not leak
`defg`, and it becomes `***`.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

if TYPE_CHECKING:
    from awf_nb.workflow.model import Workflow

MASK = "***"

# Shorter values are ignored: masking a two- or three-character value ("ab", "yes", "1")
# would replace it inside every word that contains it and make all output unreadable,
# while hiding next to nothing (such a value is trivially guessable anyway).
MIN_SECRET_LENGTH = 4

_SECRET_WORDS = frozenset(
    {
        "secret", "password", "passwd", "passphrase", "token", "apikey",
        "credential", "credentials", "privatekey",
    }
)  # fmt: skip
# Words, at lower-to-upper case changes and at separators: "dbPassword" -> db, password.
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def name_words(name: str) -> list[str]:
    """The lower-case words of an input or variable name."""
    return [word.lower() for word in _WORD.findall(name)]


def is_secret_name(name: str) -> bool:
    """True when an input or env var called `name` holds a secret (see the module doc)."""
    words = name_words(name)
    if any(word in _SECRET_WORDS for word in words):
        return True
    if len(words) > 1 and words[-1] == "key":  # OPENAI_KEY, ssh-key
        return True
    return any(pair == ("api", "key") for pair in itertools.pairwise(words))


_SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "set-cookie"})


def is_secret_header(name: str) -> bool:
    """`Authorization`, cookies, and headers with a secret-looking name (`X-Api-Key`)."""
    return name.strip().lower() in _SECRET_HEADERS or is_secret_name(name)


def option_secrets(options: Mapping[str, Any]) -> list[str]:
    """The secret values written in a step's provider options.

    `api_key` and other secret-named options; the values of secret headers, and for an
    `Authorization: Bearer X` header `X` on its own too (it is what a server may echo).
    """
    found: list[str] = []
    for key, value in options.items():
        if isinstance(value, str) and is_secret_name(key):
            found.append(value)
    headers = options.get("headers")
    if isinstance(headers, Mapping):
        for name, value in headers.items():
            if isinstance(value, str) and is_secret_header(str(name)):
                found.append(value)
                scheme, _, credentials = value.strip().partition(" ")
                if credentials and scheme.isalpha():
                    found.append(credentials.strip())
    return [value for value in found if "{{" not in value]


def is_secret_input(name: str, declared: bool | None = None) -> bool:
    """An input is secret when it says so (`secret: true/false`), else by its name."""
    return declared if declared is not None else is_secret_name(name)


class Masker:
    """A set of secret values, and the masking of text and data with them."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets: set[str] = set()
        self._ordered: tuple[str, ...] = ()
        for value in secrets:
            self.add(value)

    @classmethod
    def from_sources(
        cls,
        inputs: Mapping[str, Any],
        env: Mapping[str, str],
        extra: Iterable[str] = (),
        *,
        declared: Mapping[str, bool | None] | None = None,
    ) -> Masker:
        """The secrets of a run: secret inputs (`declared` holds each input's `secret:`
        flag) and secret-named env vars, plus explicit values."""
        masker = cls()
        declared = declared or {}
        for name, value in inputs.items():
            if value is not None and is_secret_input(name, declared.get(name)):
                masker.add(value if isinstance(value, str) else str(value))
        for name, value in env.items():
            if value and is_secret_name(name):
                masker.add(value)
        for value in extra:
            if value:
                masker.add(value)
        return masker

    @classmethod
    def for_run(
        cls, workflow: Workflow, inputs: Mapping[str, Any], env: Mapping[str, str]
    ) -> Masker:
        """Every secret a run of `workflow` knows before it starts: its secret inputs (by
        `secret:` or by name), secret-named env vars, and the literal secrets in its steps'
        provider options (`api_key`, secret headers)."""
        extra: list[str] = []
        for step in workflow.steps.values():
            options = getattr(step, "options", None)
            if isinstance(options, Mapping):
                extra.extend(option_secrets(options))
        declared = {item.name: item.secret for item in workflow.inputs}
        return cls.from_sources(inputs, env, extra, declared=declared)

    def add_option_secrets(self, options: Mapping[str, Any]) -> None:
        """Provider options: secret-named values (`api_key`) and secret headers' values."""
        for value in option_secrets(options):
            self.add(value)

    def add(self, value: str) -> None:
        """Treat `value` as secret (values shorter than 4 characters are ignored).

        A value read from a file often carries a trailing newline that never shows up in
        output, so the whitespace-stripped value is masked as well.
        """
        for candidate in {value, value.strip()}:
            if len(candidate) >= MIN_SECRET_LENGTH and candidate not in self._secrets:
                self._secrets.add(candidate)
                self._ordered = _longest_first(self._secrets)

    @property
    def secrets(self) -> tuple[str, ...]:
        """The secret values, longest first."""
        return self._ordered

    def __bool__(self) -> bool:
        return bool(self._secrets)

    def __len__(self) -> int:
        return len(self._secrets)

    def mask(self, text: str) -> str:
        """`text` with every secret occurrence replaced by `***`."""
        if not self._secrets or not text:
            return text
        return _scan(text, self._ordered, 0, final=True)[0]

    def mask_data(self, obj: Any) -> Any:
        """A copy of `obj` with every string in it masked (dicts, lists, tuples, models).

        Dict keys are left alone: they are names from the workflow (inputs, steps, fields),
        not data, and masking them could make two keys collide. Pydantic models come back
        as models of the same class (copied without re-validation, so a masked field never
        fails validation).
        """
        if not self._secrets:
            return obj
        return self._mask_any(obj)

    def _mask_any(self, obj: Any) -> Any:
        if isinstance(obj, str):
            return self.mask(obj)
        if isinstance(obj, Mapping):
            return {key: self._mask_any(value) for key, value in obj.items()}
        if isinstance(obj, list):
            return [self._mask_any(item) for item in obj]
        if isinstance(obj, tuple):
            return tuple(self._mask_any(item) for item in obj)
        if isinstance(obj, BaseModel):
            fields = type(obj).model_fields
            return obj.model_copy(
                update={name: self._mask_any(getattr(obj, name)) for name in fields}
            )
        return obj

    def stream(self) -> StreamMasker:
        """A masker for one stream of chunks, using the secrets known now."""
        return StreamMasker(self._ordered)


class StreamMasker:
    """Masks a stream whose secrets may be split across chunks.

    `feed` returns at once everything that cannot be part of a secret; only a tail that
    could be the start of a secret is held back (at most longest secret − 1 characters),
    so a stream without partial matches stays fully live. Joined together, the outputs of
    `feed` and `flush` equal `Masker.mask` of the whole stream.

    Text is cut only where no secret can straddle the cut, except that a `***` already
    shown may be followed by a secret that overlaps it; such a secret joins that `***`
    (nothing new is shown). To see those, the masker keeps the last (longest − 1)
    characters it has dealt with as context. Each `feed` costs O(len(chunk) + longest
    secret) per secret, however long the stream.
    """

    def __init__(self, secrets: Iterable[str]) -> None:
        self._secrets = _longest_first(set(secrets))
        self._longest = len(self._secrets[0]) if self._secrets else 0
        self._window = ""  # context (already dealt with) + pending text
        self._done = 0  # index in `_window` where the pending text starts

    @property
    def held_back(self) -> int:
        """How many characters fed so far are not yet reflected in the output."""
        return len(self._window) - self._done

    def feed(self, chunk: str) -> str:
        """The masked text that is safe to show now."""
        if not self._secrets:
            return chunk
        if not chunk:
            return ""
        return self._advance(self._window + chunk, final=False)

    def flush(self) -> str:
        """The rest of the stream: call once at its end (the masker can then be reused)."""
        if not self._secrets:
            return ""
        out = self._advance(self._window, final=True)
        self._window, self._done = "", 0
        return out

    def _advance(self, window: str, *, final: bool) -> str:
        out, done = _scan(window, self._secrets, self._done, final=final)
        keep_from = max(0, done - (self._longest - 1))
        self._window, self._done = window[keep_from:], done - keep_from
        return out


def _longest_first(secrets: Iterable[str]) -> tuple[str, ...]:
    # a stable order (the result never depends on it) with the longest secret first
    return tuple(sorted(secrets, key=lambda s: (-len(s), s)))


def _scan(window: str, secrets: tuple[str, ...], start: int, *, final: bool) -> tuple[str, int]:
    """Mask `window[start:]` as far as is decidable; the masked text and where it stopped.

    Unless `final`, text from the earliest position where a secret may begin that later
    text could complete is held back. Whatever lies before `start` has been shown; a
    secret found there can only overlap the last `***` shown, and joins it.
    """
    hold_from = len(window) if final else _earliest_partial(window, secrets)
    pieces: list[str] = []
    pos = start
    for run_start, run_end in _masked_runs(window, secrets, start):
        if run_start >= pos:  # a new run, not the continuation of the last `***` shown
            if run_start >= hold_from:
                break
            pieces.append(window[pos:run_start])
            pieces.append(MASK)
        # Covered text needs no holding back: it shows as `***` whatever comes next. A
        # secret from the held-back tail that overlaps the run will join it (see above).
        pos = run_end
    if pos < hold_from:
        pieces.append(window[pos:hold_from])
        pos = hold_from
    return "".join(pieces), pos


def _masked_runs(window: str, secrets: tuple[str, ...], start: int) -> list[tuple[int, int]]:
    """The masked runs that end after `start`: overlapping occurrences merged."""
    occurrences: list[tuple[int, int]] = []
    for secret in secrets:
        index = window.find(secret, max(0, start - len(secret) + 1))
        while index != -1:
            occurrences.append((index, index + len(secret)))
            index = window.find(secret, index + 1)
    occurrences.sort()
    runs: list[tuple[int, int]] = []
    for begin, end in occurrences:
        if runs and begin < runs[-1][1]:  # overlapping (not just touching): one run
            runs[-1] = (runs[-1][0], max(runs[-1][1], end))
        else:
            runs.append((begin, end))
    return runs


def _earliest_partial(window: str, secrets: tuple[str, ...]) -> int:
    """The first index from which the rest of `window` is a proper prefix of a secret.

    Text from there on could still turn into a secret; `len(window)` when none could.
    It can lie before the text already shown only inside the last `***` shown.
    Only the last (longest - 1) characters are examined, so this is O(longest) per secret.
    """
    end = len(window)
    earliest = end
    for secret in secrets:
        # Only prefixes that are proper (shorter than the secret) are undecided.
        index = window.find(secret[0], max(0, end - len(secret) + 1), earliest)
        while index != -1:
            if secret.startswith(window[index:]):
                earliest = index
                break
            index = window.find(secret[0], index + 1, earliest)
    return earliest
