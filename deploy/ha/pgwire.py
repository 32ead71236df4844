"""A small PostgreSQL client in the standard library alone.

Enough of the frontend/backend protocol (version 3.0) for the HA scripts:
start-up with trust or a password (cleartext or md5), simple queries, rows
as text, notices, and errors that keep their SQLSTATE. It exists so that the
scripts can tell apart what a client sees during a failover -- a refused
connection, a closed one, a FATAL 57P01, an ERROR 25006, a COMMIT that never
returns -- without a driver that hides those under its own retries.

Not a driver for anything else: no TLS, no SCRAM (production's passwords
use SCRAM; these scripts talk to the loopback test cluster, where
pg_hba.conf says trust).
"""

import hashlib
import socket
import struct
import time


class ConnError(Exception):
    """The connection could not be made or was lost.

    kind is one of: refused, reset, closed (the server or a proxy ended the
    connection), timeout (no answer in time: the outcome of a statement in
    flight is unknown), other.
    """

    def __init__(self, kind, detail=""):
        super().__init__("%s: %s" % (kind, detail) if detail else kind)
        self.kind = kind
        self.detail = detail


class PgError(Exception):
    """An ErrorResponse from the server. fatal: the connection is gone."""

    def __init__(self, fields):
        self.fields = fields
        self.sqlstate = fields.get("C", "")
        self.severity = fields.get("V", fields.get("S", ""))
        self.message = fields.get("M", "")
        self.fatal = self.severity in ("FATAL", "PANIC")
        super().__init__("%s %s: %s" % (self.severity, self.sqlstate, self.message))


class Result:
    def __init__(self):
        self.rows = []
        self.tag = None
        self.notices = []  # dicts of fields, as in PgError.fields

    def scalar(self):
        return self.rows[0][0] if self.rows and self.rows[0] else None


def _fields(body):
    out = {}
    i = 0
    while i < len(body) and body[i] != 0:
        code = chr(body[i])
        end = body.index(b"\0", i + 1)
        out[code] = body[i + 1:end].decode("utf-8", "replace")
        i = end + 1
    return out


def _classify(exc):
    if isinstance(exc, ConnError):
        return exc
    if isinstance(exc, socket.timeout):
        return ConnError("timeout", str(exc))
    if isinstance(exc, ConnectionRefusedError):
        return ConnError("refused", str(exc))
    if isinstance(exc, (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)):
        return ConnError("reset", str(exc))
    return ConnError("other", "%s: %s" % (type(exc).__name__, exc))


class Conn:
    def __init__(self, host="127.0.0.1", port=5432, user="postgres", database="postgres",
                 timeout=5.0, application_name="holdfast-ha", password=None):
        self.params = {}
        self.address = (host, int(port))
        self.backend_pid = None
        self.secret_key = None
        self.sock = None
        self._buf = b""
        try:
            self.sock = socket.create_connection((host, int(port)), timeout=timeout)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            body = struct.pack("!i", 196608)
            for k, v in (("user", user), ("database", database),
                         ("application_name", application_name)):
                body += k.encode() + b"\0" + v.encode() + b"\0"
            body += b"\0"
            self.sock.sendall(struct.pack("!i", len(body) + 4) + body)
            deadline = time.monotonic() + timeout
            while True:
                kind, msg = self._read(deadline)
                if kind == b"R":
                    code = struct.unpack("!i", msg[:4])[0]
                    if code == 0:
                        continue
                    if code == 3 and password is not None:
                        self._send(b"p", password.encode() + b"\0")
                    elif code == 5 and password is not None:
                        salt = msg[4:8]
                        inner = hashlib.md5(password.encode() + user.encode()).hexdigest()
                        outer = hashlib.md5(inner.encode() + salt).hexdigest()
                        self._send(b"p", b"md5" + outer.encode() + b"\0")
                    else:
                        raise ConnError("other", "authentication method %d not supported" % code)
                elif kind == b"S":
                    k, v, _ = msg.split(b"\0", 2)
                    self.params[k.decode()] = v.decode()
                elif kind == b"K":
                    self.backend_pid, self.secret_key = struct.unpack("!ii", msg[:8])
                elif kind == b"E":
                    raise PgError(_fields(msg))
                elif kind == b"Z":
                    return
        except PgError:
            self.close()
            raise
        except Exception as exc:  # noqa: BLE001 - every failure is classified
            self.close()
            raise _classify(exc) from None

    def _send(self, kind, body):
        self.sock.sendall(kind + struct.pack("!i", len(body) + 4) + body)

    def _recv_exact(self, n, deadline):
        while len(self._buf) < n:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ConnError("timeout", "no answer in time")
                self.sock.settimeout(left)
            else:
                self.sock.settimeout(None)
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnError("closed", "server closed the connection")
            self._buf += chunk
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def _read(self, deadline):
        head = self._recv_exact(5, deadline)
        kind = head[:1]
        length = struct.unpack("!i", head[1:])[0]
        return kind, self._recv_exact(length - 4, deadline)

    def query(self, sql, timeout=None):
        """Run one simple query (may hold several statements). Returns a
        Result; raises PgError (after the server is ready again, unless
        fatal) or ConnError. On ConnError the connection is closed."""
        if self.sock is None:
            raise ConnError("closed", "connection already closed")
        deadline = None if timeout is None else time.monotonic() + timeout
        res = Result()
        error = None
        try:
            self._send(b"Q", sql.encode() + b"\0")
            while True:
                kind, msg = self._read(deadline)
                if kind == b"D":
                    n = struct.unpack("!h", msg[:2])[0]
                    i = 2
                    row = []
                    for _ in range(n):
                        ln = struct.unpack("!i", msg[i:i + 4])[0]
                        i += 4
                        if ln < 0:
                            row.append(None)
                        else:
                            row.append(msg[i:i + ln].decode("utf-8", "replace"))
                            i += ln
                    res.rows.append(row)
                elif kind == b"C":
                    res.tag = msg.rstrip(b"\0").decode()
                elif kind == b"E":
                    error = PgError(_fields(msg))
                    if error.fatal:
                        self.close()
                        raise error
                elif kind == b"N":
                    res.notices.append(_fields(msg))
                elif kind == b"Z":
                    break
        except PgError:
            raise
        except Exception as exc:  # noqa: BLE001
            self.close()
            raise _classify(exc) from None
        if error is not None:
            raise error
        return res

    def cancel(self):
        """Send a CancelRequest for the statement this connection runs (from
        another thread: it opens a connection of its own)."""
        with socket.create_connection(self.address, timeout=2) as s:
            s.sendall(struct.pack("!iiii", 16, 80877102, self.backend_pid, self.secret_key))
            try:
                s.recv(1)
            except OSError:
                pass

    def close(self):
        if self.sock is not None:
            try:
                self.sock.settimeout(0.2)
                self.sock.sendall(b"X\0\0\0\4")
            except OSError:
                pass
            try:
                self.sock.close()
            except OSError:
                pass
            self.sock = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def describe(exc):
    """A short, stable label for what a client saw: the SQLSTATE of a server
    error, or the kind of a connection failure."""
    if isinstance(exc, PgError):
        return exc.sqlstate or exc.severity
    if isinstance(exc, ConnError):
        return exc.kind
    return type(exc).__name__
