// ledger-run opencode: the plugin of one run (RUN_DIR/opencode/ledger.js, owner-only). It hands each
// tool call to the ledger, which runs in the ledger-run process that started opencode, over loopback
// HTTP (no process per call), and gives OpenCode the ledger's answer: a refusal before a call, the
// answer in place of a command's output after it. Whatever goes wrong on the way (no answer, a
// timeout, an error of the ledger's), the call goes on as OpenCode would make it.
const URL = "__LEDGER_URL__"
const TOKEN = "__LEDGER_TOKEN__"
const INTERACTIVE = __LEDGER_INTERACTIVE__

async function ask(event, payload) {
  try {
    const r = await fetch(URL + event, {
      method: "POST",
      headers: { authorization: "Bearer " + TOKEN, "content-type": "application/json" },
      body: JSON.stringify(payload),
    })
    return r.ok ? await r.json() : {}
  } catch {
    return {}
  }
}

// the bus events the ledger needs: a session started (a subagent's names its parent), compacted, idle
// (the end of a turn), a tool call that failed (no tool.execute.after comes for it), and a tool output
// cleared from what OpenCode sends the model (its prune: "[Old tool result content cleared]")
function wanted(event) {
  if (["session.created", "session.compacted", "session.idle"].includes(event.type)) return true
  const part = event.type === "message.part.updated" ? event.properties?.part : undefined
  return part?.type === "tool" && (part.state?.status === "error" || !!part.state?.time?.compacted)
}

export const LedgerRuntime = async ({ client, directory }) => ({
  "tool.execute.before": async (input, output) => {
    const a = await ask("ToolBefore", { ...input, args: output.args, directory })
    if (typeof a.deny === "string") throw new Error(a.deny)
  },
  "tool.execute.after": async (input, output) => {
    const a = await ask("ToolAfter", { ...input, ...output, directory })
    if (typeof a.output === "string") output.output = a.output
  },
  "chat.message": async (input, output) => {
    const prompt = (output.parts || []).filter((p) => p.type === "text" && !p.synthetic).map((p) => p.text).join("\n")
    await ask("Prompt", { sessionID: input.sessionID, prompt })
  },
  event: async ({ event }) => {
    if (!wanted(event)) return
    const a = await ask("Event", { type: event.type, properties: event.properties, interactive: INTERACTIVE })
    if (typeof a.prompt === "string" && event.properties?.sessionID) {
      await client.session
        .promptAsync({ path: { id: event.properties.sessionID }, body: { parts: [{ type: "text", text: a.prompt }] } })
        .catch(() => {})
    }
  },
})
