#!/usr/bin/env python3
"""Drives `transcript-sync mcp` with the official MCP Python SDK (PyPI `mcp`), as an agent's
MCP client does: it starts the server over stdio, initializes, lists the tools, then calls
each tool named in CALLS (a JSON list of [tool, arguments]) and prints one JSON line per step:
{"tools": [names]}, then {"tool", "is_error", "text"} per call.

Usage: mcp-client.py CALLS SERVER [ARG...]
"""

import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main():
    calls = json.loads(sys.argv[1])
    server = StdioServerParameters(command=sys.argv[2], args=sys.argv[3:])
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            listed = await session.list_tools()
            print(json.dumps({"tools": [t.name for t in listed.tools]}), flush=True)
            for tool, arguments in calls:
                result = await session.call_tool(tool, arguments)
                text = "\n".join(c.text for c in result.content if c.type == "text")
                print(json.dumps({"tool": tool, "is_error": bool(result.is_error), "text": text}),
                      flush=True)


asyncio.run(main())
