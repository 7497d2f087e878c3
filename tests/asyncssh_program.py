"""An asyncssh program using only the subset pssh.aio keeps: run against asyncssh itself
(the control) and against pssh.aio by the same test, which compares what each saw.

Written as asyncssh users write it; ``ssh`` is the module (``asyncssh`` or
``pssh.aio``), the only thing that changes between the two runs.
"""
import os


async def exercise(ssh, host, port, user, key, workdir, bad_key):
    seen = {}
    async with ssh.connect(host, port=port, username=user, client_keys=[key],
                           known_hosts=None, passphrase=None, connect_timeout=10) as conn:
        result = await conn.run("echo out; echo err >&2; exit 2")
        seen["run"] = (result.stdout, result.stderr, result.exit_status, result.returncode,
                       result.exit_signal)
        try:
            await conn.run("exit 5", check=True)
        except ssh.ProcessError as err:
            seen["check"] = (err.exit_status, err.returncode, err.stdout, err.stderr)
        proc = await conn.create_process("tr a-z A-Z")
        proc.stdin.write("hello\nworld\n")
        proc.stdin.write_eof()
        seen["process"] = await proc.stdout.read()
        await proc.wait()
        async with conn.start_sftp_client() as sftp:
            local = os.path.join(workdir, "local.bin")
            with open(local, "wb") as fh:
                fh.write(bytes(range(256)) * 4096)
            remote_dir = os.path.join(workdir, "remote")
            await sftp.mkdir(remote_dir)
            progress = []
            await sftp.put(local, remote_dir + "/up.bin",
                           progress_handler=lambda src, dst, done, total:
                           progress.append((type(src), type(dst), total)))
            attrs = await sftp.stat(remote_dir + "/up.bin")
            seen["stat"] = (attrs.size, attrs.permissions & 0o170000 == 0o100000, attrs.type)
            seen["listdir"] = sorted(await sftp.listdir(remote_dir))
            await sftp.get(remote_dir + "/up.bin", os.path.join(workdir, "down.bin"))
            with open(os.path.join(workdir, "down.bin"), "rb") as fh:
                seen["get"] = fh.read() == bytes(range(256)) * 4096
            seen["progress"] = progress[-1] if progress else None
    try:
        async with ssh.connect(host, port=port, username=user, client_keys=[bad_key],
                               known_hosts=None, connect_timeout=10):
            pass
    except ssh.PermissionDenied:
        seen["denied"] = "PermissionDenied"
    return seen
