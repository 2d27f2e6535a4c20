#include "worker/tokenizer/tiny_corpus.h"

namespace pkv {

// Written for this project: plain English prose, a little dialogue, numbers, punctuation, and short
// programs in a few languages, so the learned merges cover what test prompts usually contain.
// Changing a single byte here changes every tiny tokenizer (and the demo model's token ids).
std::string_view TinyTokenizerCorpus() {
  return R"corpus(The lighthouse keeper woke before dawn, as he had every morning for thirty years.
He climbed the spiral stairs, counted the steps out of habit, and wiped the salt from the great
lens. The sea was calm; the sky was the colour of pale tin. Somewhere below, a gull was arguing
with another gull about a fish that neither of them had caught.

"Do you ever get lonely out here?" the young engineer asked when the supply boat arrived.
"Lonely? No," he said. "There's the wind, the birds, the ships that pass in the night. I've got
more company than I'd like, most days." She laughed, and wrote something in her notebook.

A small language model reads text as a sequence of tokens. Each token is a piece of a word, a
whole word, a number, or a bit of punctuation. The model predicts the next token, then the next,
one step at a time. It does not see letters; it sees the ids of the pieces. That is why the
tokenizer matters: it decides what the pieces are, and the same text must always be split the
same way, on every machine, in every language the server speaks.

When a request arrives, the server turns the prompt into tokens, writes their keys and values into
pages of memory, and then decodes. Every step, it looks at how long each sequence really is and
chooses how to spread the attention work across the processors. Short rows finish early; long rows
are split into pieces and merged at the end. Nothing is copied twice, and nothing waits longer than
it must.

Numbers appear everywhere: 1, 2, 3, 10, 42, 100, 256, 1024, 2048, 4096, 65536, 3.14, 2.718,
0.5, 1e-5, 2024-06-07, 12:30, 99%, $4.50, #7, v1.2.3, 127.0.0.1:8080.

Questions, answers, and lists:
- What is the capital of France? Paris.
- How many days are in a week? Seven.
- Which is larger, 9.11 or 9.9? 9.9 is larger.
- Why is the sky blue? Because air scatters blue light more than red light.

It's a truth we don't often say out loud: we'll never finish everything, and that's fine. They're
here, you're there, and we've all got work to do. Isn't it strange? Wasn't it obvious? I'm not sure.

def fibonacci(n):
    """Return the n-th Fibonacci number."""
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a

for i in range(10):
    print(f"fib({i}) = {fibonacci(i)}")

#include <stdio.h>

int main(int argc, char** argv) {
    for (int i = 0; i < argc; ++i) {
        printf("%d: %s\n", i, argv[i]);
    }
    return 0;
}

fn main() {
    let words = vec!["alpha", "beta", "gamma"];
    for (i, w) in words.iter().enumerate() {
        println!("{} {}", i, w);
    }
}

const sum = (xs) => xs.reduce((a, b) => a + b, 0);
console.log(sum([1, 2, 3, 4]));  // 10

SELECT name, COUNT(*) AS total FROM orders WHERE status = 'done' GROUP BY name ORDER BY total DESC;

{"model": "tiny", "layers": 2, "heads": 4, "vocab": 512, "rope_theta": 10000.0, "tied": true}

The quick brown fox jumps over the lazy dog. Pack my box with five dozen liquor jugs! How vexingly
quick daft zebras jump; the five boxing wizards jump quickly. Sphinx of black quartz, judge my vow.

A few words from elsewhere: café, naïve, résumé, über, señor, façade, São Paulo, Zürich, Kraków.
Un peu de français : bonjour, merci, à bientôt. Ein bisschen Deutsch: Guten Morgen, danke schön.
Un poco de español: ¿cómo estás? ¡Muy bien, gracias! 日本語、中文、한국어 and emoji 🙂👍🚀 too.

In the evening the wind rose. The keeper lit the lamp, checked the clockwork, and sat by the window
with a cup of tea. Far out, a ship's lights moved slowly from north to south, and then were gone.
He wrote in the log: "Wind north-west, rising. Sea moderate. All well." Then he went to sleep.
)corpus";
}

}  // namespace pkv
