"""Loopback test servers shared by several test files."""

import asyncio
import threading

from aiohttp import web


class RecordedResponses:
    """A loopback HTTP server answering ``POST /v1/responses`` with a recorded body."""

    def __init__(self, body: dict):
        self.body = body
        self.requests: list[dict] = []

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self):
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()

        async def handler(request):
            self.requests.append(await request.json())
            return web.json_response(self.body)

        async def start():
            app = web.Application()
            app.router.add_post("/v1/responses", handler)
            self.runner = web.AppRunner(app)
            await self.runner.setup()
            site = web.TCPSite(self.runner, "127.0.0.1", 0)
            await site.start()
            self.port = site._server.sockets[0].getsockname()[1]

        def serve():
            asyncio.set_event_loop(self.loop)
            self.loop.run_until_complete(start())
            ready.set()
            self.loop.run_forever()

        self.thread = threading.Thread(target=serve, daemon=True)
        self.thread.start()
        ready.wait(10)
        return self

    def __exit__(self, *exc):
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
