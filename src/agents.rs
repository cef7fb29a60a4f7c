//! What is particular to each agent: one module per agent.

pub(crate) mod aider;
pub(crate) mod amp;
pub(crate) mod claude_code;
pub(crate) mod cline;
pub(crate) mod codex;
pub(crate) mod copilot_cli;
pub(crate) mod crush;
pub(crate) mod cursor;
pub(crate) mod droid;
pub(crate) mod gemini_cli;
pub(crate) mod generic;
pub(crate) mod gptme;
pub(crate) mod message;
pub(crate) mod mistral_vibe;
pub(crate) mod opencode;
pub(crate) mod pi;
pub(crate) mod qwen_code;
