// An MCP server of the session protocol only (TypeScript SDK 1.32, before 2026-07-28): it
// answers a `server/discover` probe with an error, as older servers in the wild do.
// Usage: node legacy_http_server.mjs PORT
import { createServer } from "node:http";
import { randomUUID } from "node:crypto";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";

const transports = new Map();

function newServer() {
  const server = new McpServer({ name: "legacy-tools", version: "1.0.0" });
  server.tool("echo", { text: z.string() }, async ({ text }) => ({
    content: [{ type: "text", text }],
  }));
  return server;
}

createServer(async (req, res) => {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  const text = Buffer.concat(chunks).toString();
  const body = text ? JSON.parse(text) : undefined;
  const sessionId = req.headers["mcp-session-id"];
  let transport = sessionId ? transports.get(sessionId) : undefined;
  if (!transport) {
    transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => transports.set(id, transport),
    });
    await newServer().connect(transport);
  }
  await transport.handleRequest(req, res, body);
}).listen(Number(process.argv[2]), "127.0.0.1");
