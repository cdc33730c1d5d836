// OpenAiProvider against the fake OpenAI Chat Completions server: the LLM client contract.
import t from 'tap'
import { llmClientContract } from '../contract/llm-client.contract.js'
import { OPENAI } from './subjects.js'

llmClientContract(t, OPENAI)
