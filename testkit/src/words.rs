//! Made-up text for benchmark corpora. Words are drawn one at a time from a vocabulary of
//! 3,000 made-up words, the common ones more often, so that no passage repeats (a repeating
//! text compresses as no agent's transcript does).

use crate::records::Rng;

/// Deterministic words and prose, from a seed.
pub struct Words {
    /// Its random numbers, for a caller's other choices too.
    pub rng: Rng,
    vocab: Vec<String>,
}

impl Words {
    pub fn new(seed: u64) -> Words {
        const SYLLABLES: &[&str] = &[
            "ra", "te", "lo", "mi", "ka", "sen", "dor", "vi", "pa", "nu", "ex", "tor", "al", "is",
            "ch", "un", "re", "de", "in", "ab", "le", "st", "on", "or", "qu", "fi", "ty", "ng",
        ];
        let mut rng = Rng::new(seed);
        let vocab = (0..3000)
            .map(|_| {
                let n = 1 + rng.below(3);
                (0..n)
                    .map(|_| SYLLABLES[rng.below(SYLLABLES.len() as u64) as usize])
                    .collect()
            })
            .collect();
        Words { rng, vocab }
    }

    /// A word, the first hundred about a third of the time (prose is skewed so).
    pub fn word(&mut self) -> &str {
        let x = self.rng.unit();
        let i = (x * x * x * self.vocab.len() as f64) as usize;
        &self.vocab[i.min(self.vocab.len() - 1)]
    }

    /// About `len` bytes of sentences in paragraphs.
    pub fn prose(&mut self, len: usize) -> String {
        let mut text = String::with_capacity(len + 64);
        let mut sentences = 0;
        while text.len() < len {
            let words = 5 + self.rng.below(14);
            for i in 0..words {
                let comma = self.rng.below(12) == 0;
                let word = self.word();
                if i == 0 {
                    let mut chars = word.chars();
                    text.extend(chars.next().map(|c| c.to_ascii_uppercase()));
                    text.push_str(chars.as_str());
                } else {
                    text.push(if comma { ',' } else { ' ' });
                    text.push_str(word);
                }
            }
            sentences += 1;
            text.push_str(if sentences % 5 == 0 { ".\n\n" } else { ". " });
        }
        text
    }
}
