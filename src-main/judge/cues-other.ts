// Chinese, Spanish, German and French cues of the heuristic judge (docs/design.md §Judges).
// Same weights as the English cues: 1 for a courtesy or a mild signal, 2 for an unmistakable
// one. Chinese matches substrings (no spaces between words); the others match whole words.
import { substrings, words, type CueSet } from './cue-scoring.js';

// 不/没/没有/别/未/非 just before a cue, with at most two characters between ("不太对", "没有解决").
const ZH_NEGATOR_BEFORE = /(?:不|没有?|别|未|非|无)[太很是怎么大够也都还]{0,2}$/u;

export const CHINESE: CueSet = {
  negatedBefore: (before) => ZH_NEGATOR_BEFORE.test(before),
  cues: [
    { re: substrings('谢谢', '感谢', '多谢', '谢啦', '谢了', '辛苦了'), weight: 1 },
    { re: substrings('对的', '对了', '可以用', '正确', '有用', '好用', '清楚', '明白了', '懂了', '理解了', '解决', '成功', '可以了', '行了', '好了', '厉害', '棒', '赞', '不错', '没错', '没问题'), weight: 1, negatable: true },
    { re: substrings('完美', '太好了', '正是我', '就是我要的', '原来如此', '搞定', '跑通', '管用', '生效了'), weight: 2, negatable: true },
    { re: substrings('错', '报错', '失败', '崩溃', '一般般', '不行'), weight: -1, negatable: true },
    { re: substrings('不对', '不是我要的', '不是吧', '不是我想要的', '我要的是', '我说的是', '我说过', '我刚才说', '我想要的是', '一样的错误', '同样的错误', '一模一样', '反了', '没用', '都不', '不合适', '不太对', '不大对', '不明白', '不懂', '没解决', '重写', '重新写'), weight: -2 },
    { re: substrings('还是', '仍然', '依然'), weight: -1 },
    { re: substrings('太长', '太短', '太多', '太少', '太复杂', '太难', '太正式', '太生硬', '太啰嗦', '太笼统', '短一点', '简单一点', '长一点', '改一下', '换成'), weight: -2 },
  ],
};

// Spanish: "no", "nunca", "ni", "tampoco", "sin" before a cue ("no funciona", "no me convence").
const ES_NEGATOR_BEFORE = /(?<![\p{L}])(?:no|nunca|ni|tampoco|sin|nada)\s+(?:[\p{L}]+\s+){0,2}$/iu;

export const SPANISH: CueSet = {
  negatedBefore: (before) => ES_NEGATOR_BEFORE.test(before),
  cues: [
    { re: words('gracias', 'mil gracias', 'muchas gracias', 'te lo agradezco'), weight: 1 },
    { re: words('perfecto', 'genial', 'excelente', 'estupendo', 'correcto', 'exacto', 'exactamente', 'útil', 'muy claro', 'claro', 'funciona', 'funcionó', 'sirve', 'sirvió', 'convence', 'me encanta', 'me gusta', 'qué bien', 'muy bien', 'bien hecho', 'entendido', 'resuelto', 'solucionado'), weight: 1, negatable: true },
    { re: words('ya funciona', 'funciona de maravilla', 'de maravilla', 'eso era', 'justo lo que (?:buscaba|quería|necesitaba)', 'me salvaste'), weight: 2, negatable: true },
    { re: words('mal', 'incorrecto', 'equivocado', 'errónea?', 'error(?:es)?', 'falla', 'falló', 'denegado', 'inútil', 'confuso'), weight: -1, negatable: true },
    { re: words('(?:el )?mismo (?:error|resultado|problema)', 'sigue (?:sin|dando|igual|fallando)', 'sigo sin', 'al revés', 'ninguna', 'ninguno', 'no es (?:lo que|eso)', 'te pedí', 'pedí', 'te dije', 'yo quería', 'otra vez'), weight: -2 },
    { re: words('demasiado', 'muy (?:largo|larga|formal|corto|corta|complicado|complicada)'), weight: -2 },
    { re: words('(?:puedes|podrías) (?:acortar\\p{L}*|cambiar\\p{L}*|hacer\\p{L}*|reescribir\\p{L}*|corregir\\p{L}*|quitar\\p{L}*)', 'en vez de', 'en lugar de'), weight: -2 },
    { re: words('quería', 'sigue'), weight: -1 },
  ],
};

// German negates after the verb ("funktioniert nicht", "überzeugt mich nicht") as well as before.
const DE_NEGATOR_BEFORE = /(?<![\p{L}])(?:nicht|kein\p{L}*|nie|niemals)\s+(?:[\p{L}]+\s+){0,2}$/iu;
const DE_NEGATOR_AFTER = /^(?:\s+[\p{L}']+){0,2}\s+(?:nicht|nie|kein\p{L}*)(?![\p{L}])/iu;

export const GERMAN: CueSet = {
  negatedBefore: (before) => DE_NEGATOR_BEFORE.test(before),
  negatedAfter: (after) => DE_NEGATOR_AFTER.test(after),
  cues: [
    { re: words('danke', 'danke dir', 'danke schön', 'dankeschön', 'vielen dank', 'besten dank'), weight: 1 },
    { re: words('super', 'perfekt', 'genau', 'stimmt', 'richtig', 'passt', 'klappt', 'funktioniert', 'läuft', 'hilfreich', 'klasse', 'prima', 'toll', 'wunderschön', 'verstanden', 'verständlich', 'gut', 'sehr gut', 'überzeugt', 'gelöst'), weight: 1, negatable: true },
    { re: words('hat geklappt', 'das war\'s', 'das wars', 'einwandfrei', 'genau so', 'jetzt hab ich\'s', 'läuft jetzt', 'funktioniert jetzt'), weight: 2, negatable: true },
    { re: /(?:^|[.!?]\s*|\n)\s*(?:nein|nö)(?![\p{L}])/giu, weight: -2 },
    { re: words('falsch', 'fehlerhaft', 'unbrauchbar', 'kaputt', 'verweigert', 'verwirrend', '\\p{L}*fehler\\p{L}*', 'schlecht'), weight: -1, negatable: true },
    { re: words('(?:gleicher|gleiche|derselbe|selbe|gleichen) (?:fehler|ergebnis|problem)', 'immer noch', 'noch immer', 'nicht ganz', 'keiner', 'keine der', 'falsch herum', 'ich wollte', 'ich meinte', 'ich sagte', 'ich hatte gesagt', 'hab(?:e)? ich (?:doch )?gesagt', 'vergessen', 'na toll', 'schon wieder'), weight: -2 },
    { re: words('viel zu', 'zu (?:lang|kurz|förmlich|formell|kompliziert|allgemein|ungenau|steif|lässig)', 'kürzer', 'länger', 'einfacher', 'stattdessen', 'lieber'), weight: -2 },
  ],
};

// French: "ne … pas" around the verb, "pas" before an adjective ("pas convaincu"), or "pas"
// right after the verb in speech ("ça marche pas").
const FR_NEGATOR_BEFORE = /(?<![\p{L}])(?:ne|n'|pas|jamais|aucun\p{L}*|rien)\s*(?:[\p{L}]+\s+){0,2}$/iu;
const FR_NEGATOR_AFTER = /^(?:\s+[\p{L}']+){0,1}\s+(?:pas|jamais|plus)(?![\p{L}])/iu;

export const FRENCH: CueSet = {
  negatedBefore: (before) => FR_NEGATOR_BEFORE.test(before),
  negatedAfter: (after) => FR_NEGATOR_AFTER.test(after),
  cues: [
    { re: words('merci', 'merci beaucoup', 'merci bien', 'mille mercis'), weight: 1 },
    { re: words('parfait', 'génial', 'super', 'excellent', 'exact', 'exactement', 'clair', 'très clair', 'marche', 'fonctionne', 'utile', 'convaincu', 'top', 'magnifique', 'impeccable', 'adore', 'adoré', 'j\'adore', 'compris', 'résolu', 'très bien'), weight: 1, negatable: true },
    { re: words('ça marche', 'nickel', 'c\'était ça', 'c\'est ça', 'c\'est juste', 'c\'est parfait', 'pile ce que', 'ça tourne'), weight: 2, negatable: true },
    { re: /(?:^|[.!?]\s*|\n)\s*(?:non|nan)(?![\p{L}])/giu, weight: -2 },
    { re: words('faux', 'fausse', 'erreurs?', 'incorrecte?', 'mauvaise?', 'mal', 'refusée?', 'ça plante', 'inutile', 'bof'), weight: -1, negatable: true },
    { re: words('(?:la )?même erreur', 'toujours (?:la même|le même|pas|rien)', 'pas tout à fait', 'aucune?', 'l\'inverse', 'à l\'envers', 'je voulais', 'je veux', 'j\'ai demandé', 'je t\'ai dit', 'oublié', 'encore une erreur'), weight: -2 },
    { re: words('toujours'), weight: -1 },
    { re: words('trop', 'beaucoup trop', 'raccourcir', 'plus court', 'plus simple', 'à la place', 'plutôt'), weight: -2 },
  ],
};
