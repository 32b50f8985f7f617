"""Where the client finds the head and its token: environment, then CORRAL_HOME/client.json."""

from __future__ import annotations

import json
import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from corral.client.errors import InvalidRequest, Unreachable

CLIENT_CONFIG = "client.json"
HOW_TO_START = "start a local cluster with `corral up`, or set CORRAL_HEAD and CORRAL_TOKEN"
UNTRUSTED = (
    "the head's TLS certificate is not trusted here: point SSL_CERT_FILE at its certificate (or at the CA that"
    " signed it)"
)


def unreachable_hint(failures: list[str]) -> str:
    """What to do about heads that could not be reached: trust their certificate, or start or name one."""
    return UNTRUSTED if any("CERTIFICATE_VERIFY_FAILED" in failure for failure in failures) else HOW_TO_START


def head_urls(text: str) -> list[str]:
    """``http://h1:8470,http://h2:8470`` → each head's URL (several heads share one database)."""
    return [url.strip().rstrip("/") for url in text.split(",") if url.strip()]


def corral_home() -> Path:
    return Path(os.environ.get("CORRAL_HOME") or Path.home() / ".corral").expanduser().absolute()


def dir_problem(path: Path) -> str | None:
    """Why ``path`` cannot be a directory to work in (CORRAL_HOME, an agent's work directory): it, or a
    directory above it, is a file, or it cannot be created; None where it is a directory or could be made.
    Nothing is left behind: where ``path`` is missing, a directory is made and removed at once beside the
    nearest one that exists, to learn whether it can be."""
    for above in (path, *path.parents):
        try:
            mode = os.stat(above).st_mode
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as exc:
            return f"cannot create the directory {path}: {exc.strerror or exc}"
        if stat.S_ISDIR(mode):
            return None if above == path else _creation_problem(above, path)
        what = f"{above} is {'a file, ' if stat.S_ISREG(mode) else ''}not a directory"
        return what if above == path else f"cannot create the directory {path}: {what}"
    return None


def _creation_problem(parent: Path, path: Path) -> str | None:
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".corral-probe-", dir=parent))
    except OSError as exc:
        return f"cannot create the directory {path}: {exc.strerror or exc}"
    return None


def checked_home() -> Path:
    """CORRAL_HOME, which need not exist yet (nothing is created); exit 2 naming CORRAL_HOME where it is a
    file or cannot be created."""
    home = corral_home()
    if problem := dir_problem(home):
        raise InvalidRequest(f"CORRAL_HOME: {problem}; point CORRAL_HOME at a directory")
    return home


def make_home() -> Path:
    """CORRAL_HOME, created if missing; exit 2 naming CORRAL_HOME where it is a file or cannot be made."""
    home = checked_home()
    try:
        home.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InvalidRequest(f"CORRAL_HOME: cannot create the directory {home}: {exc.strerror or exc}") from None
    return home


def head_url_problem(url: str) -> str | None:
    """Why ``url`` is not http(s)://HOST[:PORT] with PORT 1-65535 (a single trailing / allowed); None
    when it is."""
    from urllib.parse import urlsplit

    if not url:  # an entry of a comma-separated list
        return "an empty entry (a comma at the start or the end, or two in a row); expected http://HOST:PORT[,…]"

    netloc = url.partition("//")[2].split("/")[0].split("?")[0].split("#")[0]
    if "@" in netloc:  # user-info: say so without repeating what may be a password
        shown = url.replace(netloc, "…@" + netloc.rpartition("@")[2], 1)
        return (
            f"bad head URL {shown!r}: it has a user name or password before the host; expected"
            " http://HOST:PORT (or https://), with the token in CORRAL_TOKEN"
        )
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:  # a port past 65535 or not a number, an unclosed IPv6 bracket
        return f"bad head URL {url!r} ({exc}); expected http://HOST:PORT"
    if parts.scheme not in ("http", "https") or not parts.hostname or port == 0:
        return f"bad head URL {url!r}; expected http://HOST:PORT (or https://)"
    extra = [
        what
        for what, there in (
            (f"a path ({parts.path!r})", parts.path not in ("", "/")),
            ("a query (?…)", "?" in url),
            ("a fragment (#…)", "#" in url),
        )
        if there
    ]
    if extra:
        return (
            f"bad head URL {url!r}: it has {' and '.join(extra)}; expected http://HOST:PORT (or https://) with"
            " nothing after the port but an optional /"
        )
    return None


def check_head_urls(text: str, where: str) -> None:
    """Each of the comma-separated URLs is http(s)://HOST[:PORT]; exit 2 naming ``where`` otherwise."""
    for url in text.split(","):
        if problem := head_url_problem(url.strip()):
            raise InvalidRequest(f"{where}: {problem}")


TOKEN_RULE = (
    "a token is printable ASCII without spaces (the head issues tokens such as cu_… of letters, digits, _ and -:"
    " see `corral config`, `corral join-token` or `corral token create`)"
)


def token_problem(token: str) -> str | None:
    """Why ``token`` cannot go in an Authorization header (every character printable ASCII, no space);
    None when it can. The message names the offending character, never the token."""
    for index, char in enumerate(token):
        if not "!" <= char <= "~":
            return f"character {index + 1} is {char!r} (U+{ord(char):04X}); {TOKEN_RULE}"
    return None


def check_token(token: str, where: str) -> str:
    """``token`` when it is printable ASCII without spaces (or empty: no token); else exit 2 naming ``where``."""
    if problem := token_problem(token):
        raise InvalidRequest(f"{where}: {problem}")
    return token


@dataclass(frozen=True)
class ClientConfig:
    head_url: str  # one URL, or several separated by commas: the client fails over between them
    token: str


def read_config_file(home: Path | None = None) -> dict[str, str]:
    path = (home or corral_home()) / CLIENT_CONFIG
    try:
        data = json.loads(path.read_text())
    except (FileNotFoundError, ValueError, PermissionError):
        return {}
    return {k: str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def _strict_config_file() -> dict[str, str]:
    """The client config, or {} where there is none; a file that is there but unreadable is an error."""
    path = checked_home() / CLIENT_CONFIG
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise InvalidRequest(
            f"the client config {path} is unreadable or corrupt ({exc}); fix or remove it "
            "(`corral head` and `corral up` write it again), or set CORRAL_HEAD and CORRAL_TOKEN"
        ) from None
    if not isinstance(data, dict):
        raise InvalidRequest(f"the client config {path} is corrupt (not a JSON object); fix or remove it")
    return {k: str(v) for k, v in data.items()}


def load_config() -> ClientConfig:
    """The head URL and token to use; raises Unreachable if there is no head configured, InvalidRequest
    if CORRAL_HEAD is not a URL, the token cannot be sent, or the client config is corrupt."""
    env_url, env_token = os.environ.get("CORRAL_HEAD"), os.environ.get("CORRAL_TOKEN")
    if env_token is not None and not env_token.strip():  # set to drop a token: never fall back to another one
        kept = corral_home() / CLIENT_CONFIG
        raise InvalidRequest(f"CORRAL_TOKEN is set but empty: give a token, or unset it to use the token in {kept}")
    file = {} if env_url and env_token else _strict_config_file()
    url = env_url or file.get("head_url", "")
    token = env_token or file.get("token", "")
    if env_url:
        check_head_urls(env_url, "CORRAL_HEAD")
    elif url:
        check_head_urls(url, f"head_url in {corral_home() / CLIENT_CONFIG}")
    check_token(token, "CORRAL_TOKEN" if env_token else f"token in {corral_home() / CLIENT_CONFIG}")
    if not url:
        raise Unreachable(f"no Corral head is configured: {HOW_TO_START}")
    return ClientConfig(head_url=url.rstrip("/"), token=token)
