// AnthropicProvider against the fake Anthropic Messages server: the LLM client contract.
import t from 'tap'
import { llmClientContract } from '../contract/llm-client.contract.js'
import { ANTHROPIC } from './subjects.js'

llmClientContract(t, ANTHROPIC)
