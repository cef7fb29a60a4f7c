//! Text for the generated rows: names, code and paths from the words of `Words`.

use testkit::words::Words;

/// Names, code and paths in the words of [`Words`].
pub(crate) trait Code {
    /// `a_b`: a name in code.
    fn ident(&mut self) -> String;
    fn code_line(&mut self) -> String;
    fn path(&mut self) -> String;
    fn lines(&mut self, len: usize, line: impl FnMut(&mut Words, usize) -> String) -> String;
}

impl Code for Words {
    fn ident(&mut self) -> String {
        let a = self.word().to_owned();
        format!("{a}_{}", self.word())
    }

    /// One line of Rust-looking code.
    fn code_line(&mut self) -> String {
        let (a, b, c) = (self.ident(), self.ident(), self.word().to_owned());
        let n = self.rng.below(1000);
        match self.rng.below(4) {
            0 => format!("    let {a} = {c}::{b}(&{a}, {n})?;"),
            1 => format!("    fn {a}(&self, {c}: &{b}) -> Result<{c}> {{"),
            2 => format!("        if {a}.{b}() > {n} {{ return Err(Error::{c}); }}"),
            _ => format!("    // {}", self.prose(40).trim_end()),
        }
    }

    /// A path in a project's tree.
    fn path(&mut self) -> String {
        let (a, b) = (self.word().to_owned(), self.word().to_owned());
        format!("src/{a}/{b}.rs")
    }

    /// Lines made by `line` until about `len` bytes.
    fn lines(&mut self, len: usize, mut line: impl FnMut(&mut Words, usize) -> String) -> String {
        let mut text = String::with_capacity(len + 128);
        let mut n = 1;
        while text.len() < len {
            text.push_str(&line(self, n));
            text.push('\n');
            n += 1;
        }
        text
    }
}
