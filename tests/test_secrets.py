"""Tests for awf_nb.secrets: secret names, masking text and data, masking streams."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from awf_nb.engine.state import ConversationState, RunState, StepState, Turn
from awf_nb.secrets import Masker, StreamMasker, is_secret_name


def reference_mask(text: str, secrets: list[str]) -> str:
    """The masking rule, spelled out naively: overlapping occurrences make one `***`."""
    spans = sorted(
        (i, i + len(s))
        for s in secrets
        if len(s) >= 4
        for i in range(len(text))
        if text.startswith(s, i)
    )
    runs: list[list[int]] = []
    for begin, end in spans:
        if runs and begin < runs[-1][1]:
            runs[-1][1] = max(runs[-1][1], end)
        else:
            runs.append([begin, end])
    out, pos = [], 0
    for begin, end in runs:
        out += [text[pos:begin], "***"]
        pos = end
    return "".join([*out, text[pos:]])


# -- names ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "SECRET_VALUE",
        "API_KEY",
        "API_KEY_OPENAI",
        "PASSWORD",
        "PASSWORD_DB",
        "TOKEN",
        "TOKEN_GITHUB",
        "OPENAI_KEY",
        "GITHUB_TOKEN",
        "APP_SECRET",
        "DB_PASSWORD",
        "secret_value",
        "api_key",
        "github_token",
        "Db_Password",
    ],
)
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name", ["path", "SECRETARY", "MONKEY", "KEY", "KEYS_DIR", "MY_KEYS", "", "A_KEY_ID"]
)
def test_not_secret_names(name: str) -> None:
    assert not is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    ["secret", "apikey", "api-key", "apiKey", "db-password", "dbPassword", "passwd", "token",
     "HTTPToken", "ssh.key", "client_credentials"],
)  # fmt: skip
def test_secret_words(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize("name", ["tokens", "tokenizer", "max_tokens", "TOKENIZER_PATH"])
def test_words_that_only_contain_a_secret_word_are_not_secret(name: str) -> None:
    # `tokens=4000` once masked every "4000" in the output
    assert not is_secret_name(name)


# -- Masker -----------------------------------------------------------------------------


def test_short_values_are_ignored() -> None:
    masker = Masker(["abc", "", "x"])
    assert not masker
    assert masker.mask("abc x") == "abc x"
    masker.add("abcd")
    assert masker and len(masker) == 1
    assert masker.mask("abc abcd") == "abc ***"


def test_stripped_value_is_masked_too() -> None:
    masker = Masker(["hunter22\n"])
    assert masker.mask("pw=hunter22.") == "pw=***."


def test_every_occurrence_is_masked() -> None:
    masker = Masker(["s3cr3t"])
    assert masker.mask("a s3cr3t b s3cr3t") == "a *** b ***"
    # touching occurrences stay two masks: the reader sees two values were there
    assert masker.mask("s3cr3ts3cr3t") == "******"


def test_secret_inside_a_longer_secret() -> None:
    masker = Masker(["password", "password123"])
    assert masker.mask("pw: password123, old: password") == "pw: ***, old: ***"


def test_overlapping_secrets_leak_nothing() -> None:
    masker = Masker(["abcd", "cdefgh"])
    # replacing one after the other would leave "efgh" or "ab" in clear
    assert masker.mask("xabcdefghx") == "x***x"
    assert Masker(["aaaa"]).mask("baaaaaab") == "b***b"


def test_mask_without_secrets_returns_text() -> None:
    text = "nothing to hide"
    assert Masker().mask(text) is text


def test_from_sources() -> None:
    masker = Masker.from_sources(
        inputs={"api_key": "sk-input-1234", "path": "src/main.py", "pin_password": 987654},
        env={"GITHUB_TOKEN": "ghp_envtoken", "HOME": "/root", "EMPTY_KEY": ""},
        extra=["provider-key-xyz", ""],
    )
    assert sorted(masker.secrets) == sorted(
        ["sk-input-1234", "987654", "ghp_envtoken", "provider-key-xyz"]
    )
    assert masker.mask("src/main.py ghp_envtoken 987654") == "src/main.py *** ***"


def test_secrets_are_longest_first() -> None:
    assert Masker(["abcd", "abcdefgh", "abcdef"]).secrets == ("abcdefgh", "abcdef", "abcd")


def test_mask_data_nested() -> None:
    masker = Masker(["topsecret"])
    data = {
        "topsecret": ["a topsecret", ("topsecret", 3), {"n": None, "ok": True}],
        "x": "clear",
    }
    assert masker.mask_data(data) == {
        "topsecret": ["a ***", ("***", 3), {"n": None, "ok": True}],
        "x": "clear",
    }
    assert data["topsecret"][0] == "a topsecret"  # the original is not changed


def test_mask_data_keeps_pydantic_models() -> None:
    state = RunState(
        run_id="r1",
        workflow_name="wf",
        inputs={"token": "tok-123456", "n": 1},
        steps={
            "chat": StepState(
                name="chat",
                output="got tok-123456",
                conversation=ConversationState(turns=[Turn(role="user", content="tok-123456")]),
            )
        },
    )
    masked = Masker(["tok-123456"]).mask_data(state)
    assert isinstance(masked, RunState)
    assert masked.inputs == {"token": "***", "n": 1}
    assert masked.steps["chat"].output == "got ***"
    assert masked.steps["chat"].conversation.turns[0].content == "***"
    assert "tok-123456" not in masked.to_json()
    assert state.steps["chat"].output == "got tok-123456"


def test_mask_data_without_secrets_is_identity() -> None:
    data = {"a": ["b"]}
    assert Masker().mask_data(data) is data


# -- StreamMasker -----------------------------------------------------------------------


def feed_all(stream: StreamMasker, chunks: list[str]) -> list[str]:
    return [stream.feed(chunk) for chunk in chunks] + [stream.flush()]


def test_stream_without_secrets_passes_through() -> None:
    stream = Masker().stream()
    assert stream.feed("abc") == "abc"
    assert stream.flush() == ""


def test_stream_without_partial_match_holds_nothing_back() -> None:
    stream = Masker(["sk-live-123"]).stream()
    for chunk in ["Hello", ", world", "! no key", " here"]:
        assert stream.feed(chunk) == chunk
        assert stream.held_back == 0
    assert stream.feed("masked: sk-live-123 done") == "masked: *** done"
    assert stream.held_back == 0


def test_stream_holds_back_only_a_possible_secret_start() -> None:
    secret = "sk-live-123"
    stream = Masker([secret]).stream()
    assert stream.feed("key=sk-live-12") == "key="
    assert stream.held_back == len(secret) - 1
    # the next character decides: not the secret, so everything comes out at once
    assert stream.feed("4") == "sk-live-124"
    assert stream.held_back == 0


def test_stream_secret_split_one_char_per_chunk() -> None:
    secret = "sk-live-123"
    text = f"a {secret} b {secret}{secret} c"
    outputs = feed_all(Masker([secret]).stream(), list(text))
    assert "".join(outputs) == "a *** b ****** c"
    seen = ""
    for out in outputs:
        seen += out
        assert "sk-" not in seen


def test_stream_flush_releases_an_undecided_tail() -> None:
    stream = Masker(["abcdef"]).stream()
    assert stream.feed("xx abc") == "xx "
    assert stream.flush() == "abc"
    assert stream.feed("abcdef") == "***"  # reusable after flush
    assert stream.flush() == ""


def test_stream_overlapping_secret_joins_the_shown_mask() -> None:
    stream = Masker(["abcd", "cdefgh"]).stream()
    assert stream.feed("xabcd") == "x***"
    assert stream.feed("ef") == ""
    assert stream.feed("gh!") == "!"  # "efgh" is covered by the same "***"
    assert stream.flush() == ""


def test_stream_long_run_of_a_self_overlapping_secret_is_bounded() -> None:
    stream = Masker(["aaaa"]).stream()
    out = [stream.feed("a") for _ in range(1000)]
    assert "".join(out) == "***"
    assert stream.held_back <= 3
    assert len(stream._window) <= 2 * 4  # context + pending, not the whole stream
    assert stream.feed("b") == "b"


def test_stream_uses_secrets_known_at_creation() -> None:
    masker = Masker(["first-secret"])
    stream = masker.stream()
    masker.add("second-secret")
    assert stream.feed("first-secret second-secret") == "*** second-secret"


ALPHABET = "abc-"
secret_strategy = st.text(alphabet=ALPHABET, min_size=4, max_size=9)


@st.composite
def text_and_chunks(draw: st.DrawFn) -> tuple[list[str], str, list[str]]:
    secrets = draw(st.lists(secret_strategy, min_size=1, max_size=3))
    # text made of random filler and whole secrets, so that secrets do occur
    pieces = draw(
        st.lists(st.one_of(st.text(alphabet=ALPHABET, max_size=6), st.sampled_from(secrets)))
    )
    text = "".join(pieces)
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=len(text) + 1)))
    bounds = [0, *cuts, len(text)]
    chunks = [text[a:b] for a, b in itertools.pairwise(bounds)]
    return secrets, text, chunks


@settings(max_examples=400, deadline=None)
@given(text_and_chunks())
def test_stream_equals_whole_text_masking(case: tuple[list[str], str, list[str]]) -> None:
    secrets, text, chunks = case
    masker = Masker(secrets)
    expected = reference_mask(text, secrets)
    assert masker.mask(text) == expected
    stream = masker.stream()
    longest = max(len(s) for s in secrets)
    shown = ""
    for chunk in chunks:
        shown += stream.feed(chunk)
        assert stream.held_back <= longest - 1
        assert not any(secret in shown for secret in secrets)
    shown += stream.flush()
    assert shown == expected


@settings(max_examples=200, deadline=None)
@given(secret_strategy, st.text(alphabet=ALPHABET + "xyz", max_size=40), st.data())
def test_stream_one_secret_any_split(secret: str, text: str, data: st.DataObject) -> None:
    middle = data.draw(st.integers(0, len(text)))
    text = text[:middle] + secret + text[middle:]
    sizes = data.draw(st.lists(st.integers(1, 5), min_size=1))
    stream = Masker([secret]).stream()
    shown, pos, index = "", 0, 0
    while pos < len(text):
        size = sizes[index % len(sizes)]
        shown += stream.feed(text[pos : pos + size])
        assert secret not in shown
        pos, index = pos + size, index + 1
    shown += stream.flush()
    assert shown == reference_mask(text, [secret])


# -- secrets written with JSON escapes (tool-call arguments) ----------------------------------


def test_a_secret_written_with_unicode_escapes_is_masked_where_it_is_written() -> None:
    masker = Masker(["sk-live-1234"])
    arguments = r'{"command": "echo \u0073k-live-1234 > \u0073\u006b-live-1234.txt"}'

    masked = masker.mask(arguments)

    assert masked == r'{"command": "echo *** > ***.txt"}'


@pytest.mark.parametrize("password", ['pa"ss-word', "pa\\ss-word", 'x\\"y\n-z', "naïve-пароль"])
@pytest.mark.parametrize("ascii_only", [False, True])
def test_a_password_with_quotes_or_backslashes_is_masked_in_json(
    password: str, ascii_only: bool
) -> None:
    arguments = json.dumps({"command": f"login --password {password} now"}, ensure_ascii=ascii_only)
    if ascii_only or '"' in password or "\\" in password:
        assert password not in arguments  # the JSON text does not hold it as written

    masked = Masker([password]).mask(arguments)

    assert json.loads(masked) == {"command": "login --password *** now"}


def test_a_text_with_backslashes_but_no_escaped_secret_is_unchanged() -> None:
    masker = Masker(["sk-live-1234"])
    for text in [r"C:\new\table", r'{"a": "\u00e9\n\"q\""}', "\\", r"\u12", r"\ud83d alone"]:
        assert masker.mask(text) == text


json_texts = st.text(alphabet='ab"\\/\n\té€😀-', max_size=12)


# A secret that starts or ends with a quote can match across a string's own quote, which is
# masked too (nothing leaks), but then the text is no longer JSON: those are left out here.
inner_secrets = st.text(alphabet='ab"\\\n€😀-', min_size=4, max_size=8).filter(
    lambda s: s[0] != '"' and s[-1] != '"'
)


@settings(max_examples=400, deadline=None)
@given(
    inner_secrets,
    st.lists(st.one_of(json_texts, st.just("")), min_size=1, max_size=4),
    st.booleans(),
    st.data(),
)
def test_masked_json_stays_json_and_shows_no_secret_when_decoded(
    secret: str, pieces: list[str], ascii_only: bool, data: st.DataObject
) -> None:
    # Arguments whose strings hold the secret somewhere, in any JSON spelling.
    strings = [data.draw(st.sampled_from(["", secret])) + p for p in pieces] + [secret]
    arguments = json.dumps(
        {f"k{i}": text for i, text in enumerate(strings)}, ensure_ascii=ascii_only
    )

    masked = Masker([secret]).mask(arguments)

    decoded = json.loads(masked)  # still valid JSON
    assert not any(secret in value for value in decoded.values())
    assert secret not in masked


@settings(max_examples=200, deadline=None)
@given(text_and_chunks())
def test_texts_without_backslashes_mask_as_before(case: tuple[list[str], str, list[str]]) -> None:
    secrets, text, _ = case
    assert Masker(secrets).mask(text) == reference_mask(text, secrets)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet='ab"\\\n€-', min_size=4, max_size=8), st.lists(json_texts, max_size=3))
def test_no_secret_is_left_in_masked_json_whatever_it_holds(secret: str, pieces: list[str]) -> None:
    arguments = json.dumps([secret, *pieces, f"x{secret}y"])

    masked = Masker([secret]).mask(arguments)

    assert secret not in masked
    try:
        decoded = json.loads(masked)
    except ValueError:
        return  # a quote of the JSON itself was part of the secret, and masked with it
    assert not any(secret in value for value in decoded)
