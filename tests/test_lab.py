"""The lessons open in JupyterLab: `make lab` starts `jupyter lab` on nbs/ with the project's kernel. This starts it headless on
127.0.0.1, asks its REST API for every notebook, starts the project's kernel, runs one line in it, and stops the server."""
import json, os, secrets, socket, subprocess, sys, time, urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
JUPYTER = Path(sys.executable).parent / 'jupyter'


def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0)); return s.getsockname()[1]


def api(port, token, path, method='GET', body=None):
    req = urllib.request.Request(f'http://127.0.0.1:{port}/api/{path}', method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={'Authorization': f'token {token}', 'Content-Type': 'application/json'})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read() or b'null')


def run_in_kernel(port, token, kernel_id, code: str, timeout: float = 120) -> str:
    "Execute `code` in a running kernel over the server's websocket channel; returns what it printed."
    import asyncio, uuid
    from tornado.websocket import websocket_connect

    async def go():
        ws = await websocket_connect(f'ws://127.0.0.1:{port}/api/kernels/{kernel_id}/channels?token={token}')
        msg_id = uuid.uuid4().hex
        ws.write_message(json.dumps({'header': {'msg_id': msg_id, 'msg_type': 'execute_request', 'username': 'test', 'session': msg_id,
                                                'version': '5.3', 'date': ''}, 'parent_header': {}, 'metadata': {}, 'channel': 'shell',
                                     'content': {'code': code, 'silent': False, 'store_history': False, 'user_expressions': {},
                                                 'allow_stdin': False}}))
        out = []
        while True:
            m = json.loads(await ws.read_message())
            if m.get('parent_header', {}).get('msg_id') != msg_id: continue
            if m['msg_type'] == 'stream': out.append(m['content']['text'])
            if m['msg_type'] == 'error': raise AssertionError(m['content']['evalue'])
            if m['msg_type'] == 'status' and m['content']['execution_state'] == 'idle': ws.close(); return ''.join(out)
    return asyncio.run(asyncio.wait_for(go(), timeout))


@pytest.mark.slow
@pytest.mark.skipif(not JUPYTER.exists() or subprocess.run([str(JUPYTER), 'lab', '--version'], capture_output=True).returncode,
                    reason="JupyterLab is not installed (it comes with the dev extra: pip install 'scholarqa[dev]')")
def test_jupyterlab_opens_every_notebook_and_starts_the_kernel(tmp_path):
    port, token = free_port(), secrets.token_hex(16)
    env = {**os.environ, 'JUPYTER_RUNTIME_DIR': str(tmp_path / 'runtime'), 'JUPYTER_CONFIG_DIR': str(tmp_path / 'config')}
    server = subprocess.Popen([str(JUPYTER), 'lab', '--no-browser', '--ip=127.0.0.1', f'--port={port}', f'--IdentityProvider.token={token}',
                               f'--notebook-dir={ROOT / "nbs"}', *(['--allow-root'] if os.geteuid() == 0 else [])],
                              env=env, stdout=subprocess.DEVNULL, stderr=(tmp_path / 'lab.log').open('w'))
    try:
        for _ in range(120):
            try: api(port, token, 'status'); break
            except OSError: time.sleep(0.5)
        else: pytest.fail(f"jupyter lab did not answer within 60 s:\n{(tmp_path / 'lab.log').read_text()[-3000:]}")
        listed = {m['name'] for m in api(port, token, 'contents')['content'] if m['type'] == 'notebook'}
        assert listed == {p.name for p in (ROOT / 'nbs').glob('*.ipynb')}
        for name in sorted(listed):
            nb = api(port, token, f'contents/{name}')
            assert nb['type'] == 'notebook' and nb['content']['cells'], name
        specs = api(port, token, 'kernelspecs')['kernelspecs']
        assert 'python3' in specs
        kernel = api(port, token, 'kernels', 'POST', {'name': 'python3'})
        assert run_in_kernel(port, token, kernel['id'], 'import scholarqa, sys; print(sys.prefix)').strip() == sys.prefix
        api(port, token, f"kernels/{kernel['id']}", 'DELETE')
    finally:
        server.terminate()
        try: server.wait(timeout=20)
        except subprocess.TimeoutExpired: server.kill()
