"""Loopback test servers shared by several test files."""

import asyncio
import threading

from aiohttp import web


class LoopbackApp:
    """An aiohttp app on ``127.0.0.1`` (a free port) served from its own thread.

    ``with LoopbackApp({"/v1/embeddings": handler}) as srv: ... srv.base_url ...``: entering
    returns once the socket listens (a startup error is raised here, not lost in the thread);
    leaving stops the server and joins the thread. ``routes`` are POST handlers, ``get`` GET ones.
    """

    def __init__(self, routes: dict, get: dict | None = None):
        self.routes = routes
        self.get = get or {}
        self.port: int | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self):
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()
        failed: list[BaseException] = []

        async def start():
            app = web.Application()
            for path, handler in self.routes.items():
                app.router.add_post(path, handler)
            for path, handler in self.get.items():
                app.router.add_get(path, handler)
            self.runner = web.AppRunner(app)
            await self.runner.setup()
            site = web.TCPSite(self.runner, "127.0.0.1", 0)
            await site.start()
            self.port = site._server.sockets[0].getsockname()[1]

        def serve():
            asyncio.set_event_loop(self.loop)
            try:
                self.loop.run_until_complete(start())
            except BaseException as exc:  # reported by __enter__
                failed.append(exc)
                return
            finally:
                ready.set()
            self.loop.run_forever()

        self.thread = threading.Thread(target=serve, daemon=True)
        self.thread.start()
        if not ready.wait(60):
            raise RuntimeError("the loopback test server did not start within 60 s")
        if failed:
            raise RuntimeError("the loopback test server failed to start") from failed[0]
        return self

    def __exit__(self, *exc):
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(60)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(60)
        self.loop.close()


class RecordedResponses(LoopbackApp):
    """A loopback HTTP server answering ``POST /v1/responses`` with a recorded body."""

    def __init__(self, body: dict):
        self.body = body
        self.requests: list[dict] = []

        async def handler(request):
            self.requests.append(await request.json())
            return web.json_response(self.body)

        super().__init__({"/v1/responses": handler})
