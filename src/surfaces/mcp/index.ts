/** The MCP surface's public face: what the app and the other surfaces (the CLI) may use. */
export { mcpHttpRoutes } from './mcp-http.js'
export { runMcpStdio, type StdioStreams } from './mcp-stdio.js'
