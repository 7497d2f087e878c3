"""scrapli's GenericDriver over its ``ssh2`` transport (ssh2-python: a pty and a shell),
used as scrapli's documentation shows, against a real sshd.

Run: python scrapli_program.py SPEC.json (see observe.load_spec); prints what it saw.
"""
import os
import time

from observe import Observations, load_spec
from scrapli.driver.generic import GenericDriver

spec = load_spec()
seen = Observations({spec["workdir"]: "WORK"})
HOST = spec["hosts"][0]


def driver(**settings):
    args = dict(host=HOST, port=spec["port"], auth_username=spec["user"],
                auth_strict_key=False, transport="ssh2", timeout_socket=10,
                timeout_transport=30, timeout_ops=10)
    args.update(settings)
    return GenericDriver(**args)


def session_with(name, **settings):
    """Log in, look at the prompt, run commands; then what the device does next."""
    conn = driver(**settings)
    if seen.stage(f"{name}/open", lambda: conn.open() or "opened") is None:
        return None
    seen.stage(f"{name}/prompt", conn.get_prompt)
    seen.stage(f"{name}/alive", conn.isalive)
    return conn


# Under load, bash can echo a command twice (the terminal's echo of input typed ahead,
# then readline's redisplay after the prompt), on either side: the programs look at the
# command's own output lines.
def command_results(conn):
    response = conn.send_command("echo out; echo err >&2")
    many = conn.send_commands(["uname -s", "printf 'a\\nb\\n'", "true"])
    return {"output": response.result.splitlines()[-2:], "failed": response.failed,
            "channel_input": response.channel_input,
            "many": [r.result.splitlines()[-2:] for r in many]}


def interactive(conn):
    prompt = conn.get_prompt()
    response = conn.send_interactive([
        ("read -p 'Name? ' name; echo \"hello $name\"", "Name?", False),
        ("scrapli", prompt, False)])
    return [line for line in response.result.splitlines()
            if line.startswith(("Name?", "hello"))]


def long_output(conn):
    numbers = [line for line in conn.send_command("seq 1 5000").result.splitlines()
               if line.isdigit()]
    return [len(numbers), numbers[0], numbers[-1]]


conn = session_with("key", auth_private_key=spec["key"])
seen.stage("key/commands", lambda: command_results(conn))
seen.stage("key/interactive", lambda: interactive(conn))
seen.stage("key/long_output", lambda: long_output(conn))
seen.stage("key/hostkey_type", lambda: conn.transport.session.hostkey()[1])
seen.stage("key/slow_command", lambda: conn.send_command("sleep 3", timeout_ops=1).result)
seen.stage("key/alive_after_timeout", conn.isalive)
seen.stage("key/close", lambda: conn.close() or conn.isalive())

# timeout_ops runs out while the device sends nothing, until the transport's own timeout.
conn = session_with("silent", auth_private_key=spec["key"], timeout_transport=3)
seen.stage("silent/timeout", lambda: conn.send_command("sleep 20", timeout_ops=1).result)
seen.stage("silent/alive_after_timeout", conn.isalive)
conn.close()


def exit_shell():
    conn = session_with("exit", auth_private_key=spec["key"])
    conn.channel.write("exit")
    conn.channel.send_return()
    deadline = time.monotonic() + 10
    while conn.isalive() and time.monotonic() < deadline:
        time.sleep(0.05)
    seen.stage("exit/alive", conn.isalive)
    seen.stage("exit/read_at_end", lambda: [conn.transport.read() for _ in range(2)][-1])
    seen.stage("exit/close", lambda: conn.close() or conn.isalive())


exit_shell()

for name, settings in {
        "password": dict(auth_password=spec["password"]),
        "bad_password": dict(auth_password="not the password"),
        "bad_key_then_password": dict(auth_private_key=spec["unauthorized_key"],
                                      auth_password=spec["password"]),
        "bad_key": dict(auth_private_key=spec["unauthorized_key"]),
        "refused": dict(auth_private_key=spec["key"], port=spec["closed_port"]),
}.items():
    conn = session_with(name, **settings)
    if conn is not None:
        seen.stage(f"{name}/echo", lambda: conn.send_command("echo logged in").result)  # noqa: B023 - called now
        conn.close()

# auth_strict_key: scrapli compares the server's key with its known_hosts entry.
for key_line in spec["host_public_keys"]:
    key_type = key_line.split()[0]
    known_hosts = os.path.join(spec["workdir"], f"known_hosts.{key_type}")
    with open(known_hosts, "w") as fh:
        fh.write(f"{HOST} {key_line}\n")
    conn = session_with(f"strict/{key_type}", auth_private_key=spec["key"],
                        auth_strict_key=True, ssh_known_hosts_file=known_hosts)
    if conn is not None:
        conn.close()

seen.dump()
