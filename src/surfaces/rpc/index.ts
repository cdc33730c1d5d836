/** The JSON-RPC surface's public face: what the app and the other surfaces (the CLI) may use. */
export { invoke } from './rpc-dispatcher.js'
export { rpcHttpRoutes } from './rpc-http.js'
export { runRpcStdio } from './rpc-stdio.js'
