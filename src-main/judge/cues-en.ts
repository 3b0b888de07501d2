// English cues of the heuristic judge (docs/design.md §Judges). Weights: 1 for a courtesy or a
// mild signal, 2 for an unmistakable one ("did the trick", "I said", "same error").
import { substrings, words, type CueSet } from './cue-scoring.js';

// "not", "never", "no", "neither", "doesn't" … ending the text before a cue, with at most two
// words between and no punctuation ("neither option works", "not really helpful").
const NEGATOR_BEFORE =
  /(?<![\p{L}'])(?:not|never|no|hardly|barely|neither|nor|none|nothing|nobody|cannot|[\p{L}]+n't|isnt|arent|wasnt|doesnt|dont|didnt|wont|cant|couldnt|shouldnt|wouldnt|aint)\s+(?:[\p{L}']+\s+){0,2}$/iu;

export const ENGLISH: CueSet = {
  negatedBefore: (before) => NEGATOR_BEFORE.test(before),
  cues: [
    // Thanks and approval.
    { re: words('thanks?', 'thank you', 'thx', 'thnx', 'ty', 'tysm', 'cheers', 'much appreciated', 'appreciated?'), weight: 1 },
    { re: words('perfect', 'exactly', 'awesome', 'excellent', 'brilliant', 'amazing', 'fantastic', 'wonderful', 'great', 'cool', 'nice', 'neat', 'superb', 'lovely', 'love it', 'loved it', 'fascinating', 'beautiful'), weight: 1, negatable: true },
    { re: words('good', 'correct', 'helpful', 'useful', 'clear', 'clearer', 'works', 'worked', 'working', 'fixed', 'solved', 'sorted it', 'much better', 'much cleaner'), weight: 1, negatable: true },
    { re: words("that's right", 'that is right', "you're right", 'you are right', 'right on', 'spot on', 'makes sense', 'got it', "that's it", 'that was it', "that's the one", 'that helps', 'nailed it', 'well done', 'good catch', 'good tip', 'good to know', 'all green', 'all good'), weight: 1 },
    { re: words('did the trick', 'does the trick', 'like a charm', 'works now', 'works perfectly', 'exactly what I (?:needed|wanted|was looking for)', 'what I was hoping for', 'life ?saver', 'legend', 'you rock', 'that fixed', 'fixed it'), weight: 2, negatable: true },
    { re: /(?:^|[.!?]\s*)(?:sorted|solved|fixed|yes|yep|yup|finally|correct|bingo)(?![\p{L}\p{N}_])/giu, weight: 1 },
    { re: words('I (?:really )?(?:like|love)'), weight: 1, negatable: true },
    { re: words('matches (?:my|what I)', 'just what I (?:needed|wanted)', 'confirmed', 'for confirming'), weight: 1 },

    // A sentence that opens with "No"/"Nope" is a correction, unless it is "no problem" & co.
    { re: /(?:^|[.!?]\s+|\n)\s*(?:no|nope|nah)\b(?!\s+(?:problem|worries|need|rush|doubt)\b)/giu, weight: -2 },
    { re: words('no (?:problem|worries)'), weight: 1 },
    { re: words('wrong', 'incorrect', 'mistaken', 'inaccurate', 'broken', 'useless', 'unhelpful', 'terrible', 'awful', 'bad', 'worse', 'confusing', 'confused', 'nonsense', 'generic', 'myth', 'misleading'), weight: -1, negatable: true },
    { re: words('mistake', 'mistakes', 'errors?', 'bug', 'buggy', 'fails', 'failed', 'failing', 'crash(?:es|ed)?', 'hallucinat\\w*', 'exception', 'denied', 'refused', 'not found', 'no such file', 'segfault', 'traceback', 'unauthorized', 'forbidden'), weight: -1, negatable: true },
    // A pasted error name: TypeError, KeyError, NullPointerException.
    { re: /(?<![\p{L}\p{N}_])\p{Lu}\p{L}*(?:Error|Exception)(?![\p{L}\p{N}_])/gu, weight: -2 },
    { re: words('not what I', "that's not", 'that is not', 'this is not', "it's not", 'not quite', 'not exactly', 'not really', 'not even close', 'way off', 'off base', 'opposite', 'the reverse', 'backwards', 'neither', 'none of (?:these|them|the|those)', 'forget it', 'not helpful'), weight: -2 },
    { re: words('I (?:said|meant|asked for|asked you|told you|specifically|explicitly|wanted|already (?:did|tried|have|had))', "I didn't ask", 'I did not ask'), weight: -2 },
    { re: words('you (?:forgot|missed|ignored|left out|changed|included|skipped|dropped|removed|mixed|misread|misunderstood)', "you didn't", 'you did not'), weight: -2 },
    { re: words('(?:same|identical) (?:result|error|problem|issue|thing|output|message)'), weight: -2 },
    { re: words('still (?:getting|get|fails|failing|broken|the same|no luck|not|doesn\'t|does not|don\'t|confused|there|happening|crashes|errors?)', 'still'), weight: -1 },
    { re: words('(?:now|then) (?:it|I) (?:says|say|get|gets|got)'), weight: -1 },
    { re: words('(?:way|far|much) too', 'too (?:long|verbose|wordy|lengthy|short|brief|complicated|complex|vague|generic|formal|casual|slow|technical|packed|many|much)'), weight: -2 },
    { re: words('try again', 'redo', 'start over', 'rewrite it', 'do it again', 'once more', 'rewrite with'), weight: -2 },
    { re: words("(?:doesn't|does not|didn't|did not|won't|will not|don't|do not|doesnt|didnt|dont) (?:work|compile|run|help|rhyme|answer)"), weight: -2 },
    { re: words('instead', 'rather than'), weight: -1 },
    { re: words('(?:can|could|would) you (?:please )?(?:change|make|rewrite|rephrase|shorten|fix|redo|update|modify|correct|remove|write it|do it)'), weight: -2 },
    { re: words("please (?:use|change|fix|make|rewrite|redo|remove|correct|stop|don't|do not)"), weight: -1 },
    { re: words('(?:make|keep) it (?:shorter|longer|simpler|more|less|concise|brief|dynamic)'), weight: -2 },
    { re: words("you should(?:n't| not)?", 'should (?:be|have been|use|return)'), weight: -1 },
    { re: words('why (?:did|would) you'), weight: -1 },
    { re: words("isn't it", 'pretty sure', "it's actually", 'not comfortable', "don't want", 'do not want', "doesn't fit", 'more confused', 'meh', 'close,? but', 'mixing (?:it|them) up', 'mixed up', 'I was asking (?:about|for)'), weight: -1 },
    { re: /^\s*actually\b/giu, weight: -1 },
    { re: substrings('👍', '🙏', '🎉', '😍', '👌', '💯', '❤️', '🥳'), weight: 1 },
    { re: substrings('👎', '😡', '🤦', '🙄'), weight: -1 },
    // Irony: praise words that open a complaint ("oh great", "wow. truly groundbreaking").
    { re: words('oh (?:great|sure|wonderful|perfect|brilliant)', 'another (?:error|exception|bug|crash)'), weight: -2 },
  ],
};
