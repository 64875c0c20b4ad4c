r"""Secret masking: replace secret values by `***` in text, data and live streams.

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

A secret can also be written with JSON escapes: a model's tool-call arguments are JSON, so
`echo \u0073k-live-1` or a password holding `"` or `\` (written `\"`, `\\`) do not
contain the secret as written, but every frontend that decodes the arguments would show it.
`Masker.mask` therefore also looks for secrets in the text with its JSON string escapes
decoded, and masks the escaped form it finds (the text stays valid JSON: `"echo ***"`).
Streams are masked as written (`StreamMasker`): live reply text is shown, not decoded.
"""

from __future__ import annotations

import bisect
import functools
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
        r"""`text` with every secret occurrence replaced by `***`, including occurrences
        written with JSON string escapes (`\u0073k-…`, `pa\"ss`)."""
        if not self._secrets or not text:
            return text
        if "\\" in text:
            return _mask_escaped(text, self._ordered)
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

    def around_cut(self, before: str, after: str) -> tuple[str, str]:
        """The two sides of a text whose middle was left out (a command's long output),
        without any part of a secret the cut split: the end of `before` that could begin a
        secret and the start of `after` that could end one are left out too. (Masking each
        side would not find such a part: it is not a whole secret.)"""
        if not self._secrets:
            return before, after
        before = before[: _earliest_partial(before, self._ordered)]
        reversed_secrets = tuple(secret[::-1] for secret in self._ordered)
        partial = len(after) - _earliest_partial(after[::-1], reversed_secrets)
        return before, after[partial:]


class StreamMasker:
    """Masks a stream whose secrets may be split across chunks.

    `feed` returns at once everything that cannot be part of a secret; only a tail that
    could be the start of a secret is held back (at most longest secret − 1 characters),
    so a stream without partial matches stays fully live. Joined together, the outputs of
    `feed` and `flush` equal `Masker.mask` of the whole stream, but for a secret written
    with JSON escapes, which a stream shows as written (only `Masker.mask` decodes them).

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


# A JSON string escape: a surrogate pair, one \uXXXX, or a one-letter escape.
_JSON_ESCAPE = re.compile(
    r"\\u([dD][89abAB][0-9a-fA-F]{2})\\u([dD][c-fC-F][0-9a-fA-F]{2})"
    r"|\\u([0-9a-fA-F]{4})"
    r'|\\(["\\/bfnrt])'
)
_ONE_LETTER = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r",
               "t": "\t"}  # fmt: skip


def _mask_escaped(text: str, secrets: tuple[str, ...]) -> str:
    """`Masker.mask` of a text with backslashes: the secrets found as written, and those
    found once its JSON string escapes are decoded, each masked where it is written."""
    runs = _masked_runs(text, secrets, 0)
    decoded = _decode_escapes(text) if _may_hide_a_secret(text, secrets) else None
    if decoded is not None:
        plain, escapes = decoded
        starts = [escape[2] for escape in escapes]
        for begin, end in _masked_runs(plain, secrets, 0):
            runs.append((_raw_index(begin, escapes, starts, end=False),
                         _raw_index(end - 1, escapes, starts, end=True)))  # fmt: skip
        # A run never ends inside an escape: `\u00` left behind would break the JSON.
        raw_starts = [escape[0] for escape in escapes]
        runs = _merged([(_widened(b, escapes, raw_starts, end=False),
                         _widened(e, escapes, raw_starts, end=True)) for b, e in runs])  # fmt: skip
    pieces: list[str] = []
    pos = 0
    for begin, end in runs:
        pieces += [text[pos:begin], MASK]
        pos = end
    pieces.append(text[pos:])
    return "".join(pieces)


def _may_hide_a_secret(text: str, secrets: tuple[str, ...]) -> bool:
    """Whether decoding `text` could reveal a secret its raw form does not show: only an
    escape that decodes to a character of a secret can. A cheap test that spares decoding
    the usual JSON, whose escapes (`\\n`, `\\"`) are characters no secret holds."""
    return "\\u" in text or any(escape in text for escape in _escapes_of(secrets))


@functools.lru_cache(maxsize=64)
def _escapes_of(secrets: tuple[str, ...]) -> tuple[str, ...]:
    """The one-letter escapes (`\\"`, `\\n`, …) that decode to a character of a secret."""
    chars = set("".join(secrets))
    return tuple("\\" + letter for letter, char in _ONE_LETTER.items() if char in chars)


def _decode_escapes(text: str) -> tuple[str, list[tuple[int, int, int, int]]] | None:
    """`text` with its JSON string escapes decoded, and each escape as (start, end in
    `text`, start, end in the decoded text); None when it has none."""
    escapes: list[tuple[int, int, int, int]] = []
    pieces: list[str] = []
    pos = decoded_len = 0
    for match in _JSON_ESCAPE.finditer(text):
        high, low, unit, letter = match.groups()
        if high is not None:
            char = chr(0x10000 + ((int(high, 16) - 0xD800) << 10) + int(low, 16) - 0xDC00)
        elif unit is not None:
            char = chr(int(unit, 16))
        else:
            char = _ONE_LETTER[letter]
        pieces += [text[pos : match.start()], char]
        decoded_len += match.start() - pos
        escapes.append((match.start(), match.end(), decoded_len, decoded_len + 1))
        decoded_len += 1
        pos = match.end()
    if not escapes:
        return None
    pieces.append(text[pos:])
    return "".join(pieces), escapes


def _raw_index(
    index: int, escapes: list[tuple[int, int, int, int]], starts: list[int], *, end: bool
) -> int:
    """Where the decoded character at `index` is written in the text: its first raw index,
    or (`end`) the raw index just after it."""
    found = bisect.bisect_right(starts, index) - 1
    if found < 0:
        return index + 1 if end else index
    raw_start, raw_end, _, decoded_end = escapes[found]
    if index < decoded_end:  # the character is this escape
        return raw_end if end else raw_start
    raw = raw_end + index - decoded_end
    return raw + 1 if end else raw


def _widened(
    index: int, escapes: list[tuple[int, int, int, int]], raw_starts: list[int], *, end: bool
) -> int:
    """`index`, moved to the start (or `end`) of the escape it falls inside, if any."""
    found = bisect.bisect_right(raw_starts, index) - 1
    if found >= 0:
        raw_start, raw_end = escapes[found][:2]
        if raw_start < index < raw_end:
            return raw_end if end else raw_start
    return index


def _merged(runs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Runs in order, overlapping ones merged (touching ones stay apart, as in `_scan`)."""
    merged: list[tuple[int, int]] = []
    for begin, end in sorted(runs):
        if merged and begin < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((begin, end))
    return merged
