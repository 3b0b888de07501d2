#!/usr/bin/env node
// `node scripts/make-demo-data.mjs [--out DIR]`: writes the demo exports that "Load sample data",
// `hindsight demo` and the README walkthrough import (default: resources/samples/).
//
// The conversations are made up for this project, and written the same way every run (fixed
// ids and clocks, no randomness), so the committed files are exactly this script's output
// (test/import/demo-data.test.ts checks that). They are written to show the whole product:
// - a ChatGPT export of 36 conversations with real `mapping` trees: regenerated replies with
//   different texts (the dpo pairs), an edited question (an abandoned branch), custom
//   instructions, thanks, corrections, "use X instead" hints, follow-up questions, refusals,
//   tool calls that fail and then succeed, and chats that got no reaction at all;
// - a Claude export (with thinking) and a ShareGPT file, so the import shows format detection.
// After `judge --backend heuristic --hints`, every export format has lines, Checks has a real
// label distribution and sessions without samples, and a short fine-tune has signal to learn.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** 2025-02-03 09:00 UTC: the first demo chat; each later one starts half a day after. */
const START = Date.UTC(2025, 1, 3, 9, 0, 0) / 1000;
const CHAT_SPACING_S = 12 * 3600;
const MESSAGE_SPACING_S = 40;

/** A UUID-shaped id that only depends on its kind and counters. */
function demoId(kind, a, b = 0) {
  const hex = (n, width) => n.toString(16).padStart(width, '0');
  return `${hex(kind, 8)}-d0e0-4${hex(a, 3)}-8${hex(b, 3)}-${hex(kind * 65536 + a * 256 + b, 12)}`;
}

// ── conversation steps ──────────────────────────────────────────────────────────────────────

/** A user message. `replaces`: the steps of an earlier version the user edited away. */
const user = (text, replaces) => ({ kind: 'user', text, replaces });
/** An assistant reply. `regenerated`: earlier attempts at it, with other texts (abandoned). */
const reply = (text, regenerated = []) => ({ kind: 'assistant', text, regenerated });
/** The assistant calling a tool (python code, or a browser query). */
const call = (tool, code) => ({ kind: 'call', tool, code });
/** What the tool returned. */
const output = (tool, text) => ({ kind: 'output', tool, text });
/** Custom instructions, stored by ChatGPT as a hidden context message. */
const instructions = (text) => ({ kind: 'context', text });

// ── ChatGPT export (mapping trees) ──────────────────────────────────────────────────────────

class MappingBuilder {
  constructor(chatIndex, startTime) {
    this.chatIndex = chatIndex;
    this.time = startTime;
    this.mapping = {};
    this.count = 0;
  }

  /** Adds a node under `parent`; returns its id. Node order is creation order, as in exports. */
  add(parent, message) {
    const id = demoId(0xc4a7, this.chatIndex, this.count++);
    this.time += MESSAGE_SPACING_S;
    this.mapping[id] = { id, message: message && { id, create_time: this.time, ...message }, parent, children: [] };
    if (parent) this.mapping[parent].children.push(id);
    return id;
  }

  /** Adds the steps one after another from `tip`; returns the last node's id. */
  addSteps(tip, steps) {
    for (const step of steps) tip = this.addStep(tip, step);
    return tip;
  }

  addStep(tip, step) {
    switch (step.kind) {
      case 'user':
        // The edited-away version comes first: it is older, and stays as an abandoned branch.
        if (step.replaces) this.addSteps(tip, step.replaces);
        return this.add(tip, message('user', textContent(step.text)));
      case 'assistant':
        for (const attempt of step.regenerated) this.add(tip, message('assistant', textContent(attempt)));
        return this.add(tip, message('assistant', textContent(step.text)));
      case 'call':
        return this.add(tip, {
          ...message('assistant', step.tool === 'python' ? { content_type: 'code', language: 'python', text: step.code } : { content_type: 'code', language: 'unknown', text: step.code }),
          recipient: step.tool,
          end_turn: false,
        });
      case 'output':
        return this.add(tip, {
          ...message('tool', step.tool === 'python' ? { content_type: 'execution_output', text: step.text } : { content_type: 'tether_browsing_display', result: step.text, summary: '' }),
          author: { role: 'tool', name: step.tool, metadata: {} },
        });
      case 'context':
        return this.add(tip, {
          ...message('user', { content_type: 'user_editable_context', user_profile: '', user_instructions: step.text }),
          metadata: { is_visually_hidden_from_conversation: true, user_context_message_data: { about_model_message: step.text } },
        });
      default:
        throw new Error(`unknown step ${step.kind}`);
    }
  }
}

function message(role, content) {
  return {
    author: { role, name: null, metadata: {} },
    update_time: null,
    content,
    status: 'finished_successfully',
    end_turn: role === 'assistant' ? true : null,
    weight: 1,
    metadata: {},
    recipient: 'all',
    channel: null,
  };
}

const textContent = (text) => ({ content_type: 'text', parts: [text] });

function chatgptConversation(index, { title, steps }) {
  const startTime = START + index * CHAT_SPACING_S;
  const tree = new MappingBuilder(index, startTime);
  const root = tree.add(null, null);
  // Every real export starts with an empty system message hidden from the conversation.
  const system = tree.add(root, { ...message('system', textContent('')), metadata: { is_visually_hidden_from_conversation: true } });
  const leaf = tree.addSteps(system, steps);
  const id = demoId(0xc0de, index);
  return {
    title,
    create_time: startTime,
    update_time: tree.time,
    mapping: tree.mapping,
    moderation_results: [],
    current_node: leaf,
    plugin_ids: null,
    conversation_id: id,
    id,
    default_model_slug: 'gpt-4o',
    safe_urls: [],
    is_archived: false,
  };
}

const CHATGPT_CHATS = [
  // ── code ──
  {
    title: 'Sort names in Python',
    steps: [
      user('Write a Python function that sorts a list of names alphabetically, ignoring upper and lower case.'),
      reply('function sortNames(names) {\n  return [...names].sort((a, b) => a.localeCompare(b, undefined, { sensitivity: "base" }));\n}'),
      user('No, I said Python, not JavaScript.'),
      reply('def sort_names(names):\n    return sorted(names, key=str.casefold)'),
      user('Perfect, thanks!'),
    ],
  },
  {
    title: 'Reading a CSV file',
    steps: [
      user('How do I read a CSV file in Python?'),
      reply('Open the file and split each line on commas:\n\nwith open("data.csv") as f:\n    rows = [line.strip().split(",") for line in f]'),
      user('Use the csv module instead, splitting on commas breaks on quoted fields.'),
      reply('import csv\n\nwith open("data.csv", newline="") as f:\n    rows = list(csv.reader(f))\n\ncsv.reader handles quoted fields and commas inside them.'),
      user('Great, that works.'),
    ],
  },
  {
    title: 'Regex for ISO dates',
    steps: [
      user('Give me a regular expression that matches dates like 2024-03-15.'),
      reply('^\\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\\d|3[01])$ matches a four-digit year, a month from 01 to 12 and a day from 01 to 31.', [
        '\\d+-\\d+-\\d+',
      ]),
      user('Thanks, exactly what I needed.'),
    ],
  },
  {
    title: 'Two to the power of 100',
    steps: [
      user('What is 2 to the power of 100? I need the exact number.'),
      call('python', 'print(2 ** 100)'),
      output('python', '1267650600228229401496703205376'),
      reply('2^100 = 1267650600228229401496703205376.'),
      user('How many digits does it have?'),
      reply('31 digits.'),
    ],
  },
  {
    title: 'Total of a sales file',
    steps: [
      user('Load sales.csv and tell me the total of the amount column.'),
      call('python', "import pandas as pd\ndf = pd.read_csv('sales.csv')\nprint(df['amount'].sum())"),
      output('python', "Traceback (most recent call last):\n  File \"<stdin>\", line 2, in <module>\nFileNotFoundError: [Errno 2] No such file or directory: 'sales.csv'"),
      call('python', "import os\nprint(os.listdir('/mnt/data'))"),
      output('python', "['sales_2024.csv']"),
      call('python', "import pandas as pd\ndf = pd.read_csv('/mnt/data/sales_2024.csv')\nprint(round(df['amount'].sum(), 2))"),
      output('python', '48210.5'),
      reply('The file is called sales_2024.csv; its amount column adds up to 48,210.50.'),
      user('Nice, thank you.'),
    ],
  },
  {
    title: 'What git rebase does',
    steps: [
      user('Explain git rebase.'),
      reply(
        'Git rebase moves a series of commits onto a new base commit. Imagine you branched off main a week ago and main has moved on since. ' +
          'Rebasing your branch takes each of your commits in turn, computes its change, and applies that change on top of the current main, ' +
          'creating new commits with new hashes. The result is a straight line of history, as if you had started your work today. ' +
          'Interactive rebase (git rebase -i) also lets you reorder, squash, edit or drop commits along the way. ' +
          'Because it rewrites commits, never rebase commits that others have already pulled: their history and yours would diverge, ' +
          'and they would have to reconcile the duplicated work by hand. For shared branches, merge instead. ' +
          'When a conflict appears during a rebase, fix the files, git add them, and run git rebase --continue; git rebase --abort goes back to where you started.',
      ),
      user("That's too long, give me the short version."),
      reply('Rebase replays your commits on top of another branch, giving a straight history. Do not rebase commits others already have.'),
      user('Got it.'),
    ],
  },
  {
    title: 'IndexError while removing items',
    steps: [
      user('My loop `for i in range(len(items)): items.remove(items[i])` crashes with IndexError. Why?'),
      reply('Each removal shifts the later items one place to the left and shortens the list, but range(len(items)) was fixed at the start, so i runs past the end. Build a new list instead: items = [x for x in items if keep(x)].'),
      user('That fixed it, thanks.'),
    ],
  },
  {
    title: 'Borrowing in Rust',
    steps: [
      user('What does borrowing mean in Rust?'),
      reply('Borrowing is using a value through a reference (&T or &mut T) without taking ownership of it. The owner keeps the value; the borrow must end before the owner drops it.'),
      user('And what is a lifetime?'),
      reply("A lifetime is the stretch of code during which a reference is valid. The compiler checks that no reference outlives the value it points to; you name lifetimes ('a) only when it cannot work them out itself."),
      user('Show me a small example with two references.'),
      reply("fn longest<'a>(x: &'a str, y: &'a str) -> &'a str {\n    if x.len() > y.len() { x } else { y }\n}"),
    ],
  },
  {
    title: 'Customers without orders',
    steps: [
      user('Write a SQL query that lists the customers who have never placed an order.'),
      reply('SELECT c.name FROM customers c JOIN orders o ON o.customer_id = c.id;'),
      user("That's not right: an inner join drops the very customers I'm looking for. Use a LEFT JOIN instead."),
      reply('SELECT c.name\nFROM customers c\nLEFT JOIN orders o ON o.customer_id = c.id\nWHERE o.id IS NULL;'),
      user('Correct, thanks.'),
    ],
  },
  {
    title: 'Counting lines of TypeScript',
    steps: [
      user('How do I count the lines of all .ts files in a folder, including subfolders?'),
      reply("find . -name '*.ts' -print0 | xargs -0 cat | wc -l\n\nfind walks the subfolders; -print0 and xargs -0 keep file names with spaces intact.", ['wc -l *.ts']),
      user('Works, thanks.'),
    ],
  },
  {
    title: "Getting onto the neighbour's Wi-Fi",
    steps: [
      user("Write a script that logs into my neighbour's Wi-Fi without the password."),
      reply("I can't help with getting into a network you don't own. If you need internet access, ask your neighbour to share it, or look for a public hotspot nearby."),
      user('Fair enough. How do I secure my own router then?'),
      reply('Change the admin password, use WPA3 (or WPA2-AES), turn off WPS, keep the firmware updated, and put visitors on a guest network.'),
      user('Thanks, helpful list.'),
    ],
  },
  {
    title: 'Type hints for a function',
    steps: [
      user('Add type hints to this function: def area(width, height): return width * height'),
      reply('def area(width: float, height: float):\n    return width * height'),
      user('You forgot the return type.'),
      reply('def area(width: float, height: float) -> float:\n    return width * height'),
      user('Good.'),
    ],
  },
  // ── writing ──
  {
    title: 'Cover letter for a data analyst job',
    steps: [
      user('Write a short cover letter for a junior data analyst position.'),
      reply('Dear Hiring Manager,\n\nI am writing to express my sincere interest in the Junior Data Analyst position. I hereby submit my application for your esteemed consideration.\n\nYours faithfully,\nAlex'),
      user('Too formal. Make it sound like me: friendly and direct.'),
      reply("Hi there,\n\nI love turning messy spreadsheets into answers, and I'd like to do that for your team as your new junior data analyst. Last year I cleaned and charted our club's membership data in Python, and I'm keen to learn more.\n\nThanks for reading,\nAlex"),
      user('Much better, thank you!'),
    ],
  },
  {
    title: 'A short autumn poem',
    steps: [
      user('Write a four-line poem about autumn.'),
      reply('Ladders lean on apple trees,\nsmoke drifts low on the evening breeze,\nthe garden folds its summer clothes,\nand every path is lined with gold.', [
        'Autumn is here, the leaves are red,\nthe summer is over, the flowers are dead,\nthe wind is cold, the sky is grey,\nautumn is a nice time of day.',
      ]),
      user('Lovely.'),
    ],
  },
  {
    title: 'Email to my landlord',
    steps: [
      user('Help me write an email to my landlord about the broken heater.'),
      reply('Subject: Heater not working\n\nHello Ms Duarte,\n\nThe heater in my flat has stopped working. Could you arrange a repair?\n\nBest regards,\nSam'),
      user('Please add that I reported it two weeks ago.'),
      reply('Subject: Heater not working\n\nHello Ms Duarte,\n\nThe heater in my flat has stopped working. I first reported it two weeks ago, and the rooms are getting cold. Could you arrange a repair this week?\n\nBest regards,\nSam'),
      user('Great, sending it now.'),
    ],
  },
  {
    title: 'One-sentence summary about bees',
    steps: [
      user('Summarise in one sentence: Honey bees communicate the direction and distance of flowers through a waggle dance, whose angle to the vertical matches the angle between the sun and the food, and whose length grows with the distance.'),
      reply("Honey bees show where food is with a waggle dance: its angle gives the direction relative to the sun, and its length gives the distance."),
    ],
  },
  {
    title: 'Blog post titles about cooking',
    steps: [
      user('Give me five titles for a blog post about learning to cook as an adult.'),
      reply('1. Never Too Late for the Kitchen\n2. From Toast to Risotto\n3. Cooking at Thirty-Five\n4. My First Hundred Meals\n5. The Grown-Up Beginner Cook'),
      user('Give me five more, a bit funnier.'),
      reply('1. I Burned Water So You Do Not Have To\n2. Smoke Alarm, My Sous-Chef\n3. Adulting, One Onion at a Time\n4. Recipes Are Just Suggestions, Right?\n5. The Pan Is Hot, Now What?'),
      user('Ha, the third one is perfect.'),
    ],
  },
  {
    title: 'Asking for the station in German',
    steps: [
      user("Translate 'Where is the train station?' into German."),
      reply('Wo ist der Bahnhof?'),
      user('Thanks! And in Italian?'),
      reply("Dov'è la stazione?"),
    ],
  },
  {
    title: "Their, there or they're",
    steps: [
      user("Fix the grammar: 'Their going to the park tomorrow, weather permitting.'"),
      reply("There going to the park tomorrow, weather permitting."),
      user("Actually, it should be 'they're', not 'there'."),
      reply("You're right: They're going to the park tomorrow, weather permitting. ('They're' is short for 'they are'.)"),
      user('Thanks.'),
    ],
  },
  // ── maths ──
  {
    title: 'Derivative of a product',
    steps: [
      user('What is the derivative of x^2 * sin(x)?'),
      reply('By the product rule: d/dx [x^2 sin(x)] = 2x sin(x) + x^2 cos(x).'),
      user('Thanks, makes sense.'),
    ],
  },
  {
    title: '17 times 24',
    steps: [
      user('What is 17 * 24?'),
      reply('17 * 24 = 418.'),
      user("That's wrong, it is 408."),
      reply('You are right, 17 * 24 = 408 (17 * 20 = 340, plus 17 * 4 = 68).'),
      user('ok'),
    ],
  },
  {
    title: 'Two dice summing to seven',
    steps: [
      user('If I roll two dice, what is the chance that they add up to 7?'),
      reply('1/6. Of the 36 equally likely pairs, six add up to 7: (1,6), (2,5), (3,4), (4,3), (5,2) and (6,1).', ['1/12, since there are 12 possible sums.']),
      user('Great explanation.'),
    ],
  },
  {
    title: 'Why the square root of 2 is irrational',
    steps: [
      user('Why is the square root of 2 irrational?'),
      reply('Suppose √2 = p/q in lowest terms. Then p² = 2q², so p is even, say p = 2k. Then 4k² = 2q², so q² = 2k² and q is even too: both even contradicts lowest terms.'),
      user("What does 'in lowest terms' mean here?"),
      reply('That p and q have no common factor other than 1: the fraction cannot be simplified any further.'),
      user('Clear now, thank you.'),
    ],
  },
  {
    title: 'A quadratic equation',
    steps: [
      user('Solve x^2 - 5x + 6 = 0.'),
      call('python', "import sympy as sp\nx = sp.symbols('x')\nprint(sp.solve(x**2 - 5*x + 6, x))"),
      output('python', '[2, 3]'),
      reply('x = 2 or x = 3, since x^2 - 5x + 6 = (x - 2)(x - 3).'),
    ],
  },
  {
    title: 'Typical salary with outliers',
    steps: [
      user('Our salary data has a few huge outliers. The mean is 91k. What is the typical salary?'),
      reply('The typical salary is the mean: 91k.'),
      user('Use the median instead; the mean is pulled up by the outliers.'),
      reply('Right: report the median, which the few very high salaries barely move. Send me the figures and I will compute it.'),
      user('Good.'),
    ],
  },
  // ── travel ──
  {
    title: 'Three days in Lisbon',
    steps: [
      user('Plan three days in Lisbon for someone who likes food and walking.'),
      reply(
        'Day 1: start in Alfama with a coffee at a miradouro, walk down to the cathedral, have grilled sardines for lunch, visit the castle in the afternoon, and end with fado and dinner in a small tasca. ' +
          'Day 2: take the tram to Belém, try pastéis de Belém, see the monastery and the tower, walk along the river to LX Factory, and have dinner at the Time Out Market. ' +
          'Day 3: explore Príncipe Real and Bairro Alto, browse the bookshops, eat petiscos for lunch, climb to the Graça viewpoint for sunset, and finish with seafood in Cais do Sodré.',
      ),
      user('Too long. Keep it to three bullet points per day.'),
      reply('Day 1: Alfama, the castle, fado at night.\nDay 2: Belém pastries, the river walk, Time Out Market.\nDay 3: Príncipe Real, petiscos, sunset at Graça.'),
      user('Perfect.'),
    ],
  },
  {
    title: 'Packing for a hiking week in Norway',
    steps: [
      user('What should I pack for a week of hiking in Norway in June?'),
      reply('Layers (a base layer, a fleece, a waterproof shell), broken-in boots, a warm hat, midge repellent, a head torch is optional (the nights are light), a map, and blister plasters.'),
    ],
  },
  {
    title: 'Paris to London: train or plane?',
    steps: [
      user('Is it faster to take the train or to fly from Paris to London?'),
      reply('Door to door the train usually wins: the Eurostar takes about 2 h 20 from city centre to city centre, while a flight needs airport transfers and security on top of its 1 h 15.', [
        'Flying is always faster.',
      ]),
      user('Makes sense, thanks.'),
    ],
  },
  {
    title: 'A vaccination certificate for a trip',
    steps: [
      user('Make me a fake vaccination certificate for my trip.'),
      reply("I can't help create a fake certificate. If your destination requires a vaccination, a travel clinic can give you the vaccine and a valid certificate."),
      user('Okay. Where do I find the real entry requirements?'),
      reply("On the destination country's embassy or foreign-ministry website, and in your own government's travel advice pages."),
    ],
  },
  {
    title: 'Weekend weather in Kyoto',
    steps: [
      user("What's the weather going to be like in Kyoto this weekend?"),
      call('browser', 'search("Kyoto weather forecast this weekend")'),
      output('browser', 'Error: the request timed out after 30 s'),
      call('browser', 'search("Kyoto weekend forecast")'),
      output('browser', 'Kyoto, Saturday: 18 °C, light rain. Sunday: 21 °C, sunny.'),
      reply('Saturday: 18 °C with light rain, so take an umbrella. Sunday: 21 °C and sunny.'),
      user('Thanks!'),
    ],
  },
  {
    title: 'Fahrenheit to Celsius',
    steps: [
      user('Convert 70 °F to Celsius.'),
      reply('70 °F is about 21.1 °C: (70 - 32) × 5/9.', ['70 °F is 25 °C.']),
      user('Thanks'),
    ],
  },
  // ── everyday ──
  {
    title: 'Quick chickpea dinner',
    steps: [
      user("Suggest a quick dinner with chickpeas. I'm vegetarian."),
      reply('Chickpea and chorizo stew: fry the chorizo, add onion, garlic, tomatoes and the chickpeas, and simmer for 15 minutes.'),
      user('I said vegetarian. Chorizo is meat.'),
      reply('Sorry! Chickpea and spinach curry: fry onion, garlic and curry paste, add the chickpeas, a tin of coconut milk and a bag of spinach, and simmer for 10 minutes.'),
      user('Lovely, thanks.'),
    ],
  },
  {
    title: 'A question left unanswered',
    steps: [user('Can you remind me what we talked about yesterday?')],
  },
  {
    title: 'A short science-fiction novel',
    steps: [
      user('Recommend a science-fiction novel.'),
      reply('Dune by Frank Herbert: politics, religion and ecology on a desert planet.'),
      user('Something shorter, under 200 pages?', [user('Something with aliens?'), reply('Try Contact by Carl Sagan.')]),
      reply('The Invisible Man by H. G. Wells: about 150 pages, and a classic.'),
      user('Great pick.'),
    ],
  },
  {
    title: 'Rest days for a new runner',
    steps: [
      user('How many rest days a week should a beginner runner take?'),
      reply('Two or three: run every other day at first, so your muscles and tendons can adapt between runs.'),
    ],
  },
  {
    title: 'An icebreaker for my class',
    steps: [
      instructions('I teach twelve-year-olds. Keep answers short and practical.'),
      user('Give me an icebreaker for the first day of class.'),
      reply('Two truths and a lie: each pupil says three things about themselves and the class guesses which one is made up.'),
      user('The kids loved it, thank you!'),
    ],
  },
  {
    title: 'Watering tomatoes',
    steps: [
      user('How often should I water tomato plants in pots?'),
      reply('Water them every day in summer, whenever the top few centimetres of soil are dry; pots dry out much faster than beds.'),
      user('Should I water in the morning or in the evening?'),
      reply('In the morning: the plants have water for the hot part of the day, and the leaves dry quickly, which keeps mildew away.'),
    ],
  },
];

// ── Claude export ───────────────────────────────────────────────────────────────────────────

const iso = (seconds) => new Date(seconds * 1000).toISOString().replace('.000Z', '.000000Z');

function claudeConversation(index, { title, messages }) {
  let time = START + (CHATGPT_CHATS.length + index) * CHAT_SPACING_S;
  const created = time;
  const chatMessages = messages.map(([sender, text, thinking], i) => {
    time += MESSAGE_SPACING_S;
    const content = [...(thinking ? [{ type: 'thinking', thinking }] : []), { type: 'text', text }];
    return {
      uuid: demoId(0xc1a0, index, i + 1),
      text: sender === 'human' ? text : '',
      content,
      sender,
      created_at: iso(time),
      updated_at: iso(time),
      attachments: [],
      files: [],
    };
  });
  return { uuid: demoId(0xc1a0, index), name: title, created_at: iso(created), updated_at: iso(time), account: { uuid: demoId(0xacc0, 0) }, chat_messages: chatMessages };
}

const CLAUDE_CHATS = [
  {
    title: 'What a hash map is',
    messages: [
      ['human', 'Explain what a hash map is, in two sentences.'],
      ['assistant', 'A hash map stores key–value pairs in an array, using a hash of the key to pick the slot. That makes looking up, adding and removing a key take constant time on average.', 'Two sentences: the structure, then why it is fast.'],
      ['human', 'Clear, thanks.'],
    ],
  },
  {
    title: 'A haiku about the sea',
    messages: [
      ['human', 'Write a haiku about the sea.'],
      ['assistant', 'Cold grey water waits\nwreckage drifting with the tide\nno one comes back home', 'Seventeen syllables, 5-7-5.'],
      ['human', 'Can you make it less gloomy?'],
      ['assistant', 'Bright waves chase the sand\nchildren shriek and run away\nthe sea laughs with them'],
    ],
  },
  {
    title: 'Fifteen percent of 240',
    messages: [
      ['human', 'What is 15% of 240?'],
      ['assistant', '36: 10% is 24 and 5% is 12.', 'Split 15% into 10% and 5%.'],
      ['human', 'Correct.'],
    ],
  },
  {
    title: 'A name for a grey cat',
    messages: [
      ['human', 'Suggest a name for a grey cat.'],
      ['assistant', 'Ash, Smokey, Pebble or Earl Grey.'],
    ],
  },
];

// ── ShareGPT file ───────────────────────────────────────────────────────────────────────────

const SHAREGPT_CHATS = [
  {
    id: 'demo-sharegpt-css',
    conversations: [
      ['human', 'How do I centre a div horizontally and vertically with CSS?'],
      ['gpt', 'Make the parent a flex container: display: flex; justify-content: center; align-items: center;'],
      ['human', 'Works, thanks!'],
    ],
  },
  {
    id: 'demo-sharegpt-limerick',
    conversations: [
      ['human', 'Write a limerick about a cat.'],
      ['gpt', 'A cat sat alone on a wall,\nand watched as the autumn leaves fall.'],
      ['human', "That's not a limerick: it needs five lines that rhyme AABBA."],
      ['gpt', 'A cat with a taste for the cream\ncrept up with a cunning old scheme;\nshe tipped the jug over,\nthen rolled in the clover,\nand purred as if all were a dream.'],
      ['human', 'Nice.'],
    ],
  },
  {
    id: 'demo-sharegpt-capital',
    conversations: [
      ['human', 'What is the capital of Australia?'],
      ['gpt', 'Sydney.'],
      ['human', "No, it's Canberra."],
      ['gpt', 'You are right, the capital of Australia is Canberra; Sydney is its largest city.'],
    ],
  },
  {
    id: 'demo-sharegpt-synonym',
    system: 'You are a concise assistant.',
    conversations: [
      ['human', "Give me a synonym for 'happy'."],
      ['gpt', 'Glad.'],
      ['human', 'Another one?'],
      ['gpt', 'Cheerful.'],
    ],
  },
];

// ── writing the files ───────────────────────────────────────────────────────────────────────

export function demoFiles() {
  const sharegpt = SHAREGPT_CHATS.map(({ id, system, conversations }) => ({
    id,
    ...(system ? { system } : {}),
    conversations: conversations.map(([from, value]) => ({ from, value })),
  }));
  return {
    'demo-chatgpt.json': CHATGPT_CHATS.map((chat, i) => chatgptConversation(i, chat)),
    'demo-claude.json': CLAUDE_CHATS.map((chat, i) => claudeConversation(i, chat)),
    'demo-sharegpt.json': sharegpt,
  };
}

function main() {
  const at = process.argv.indexOf('--out');
  const outDir = at >= 0 ? path.resolve(process.argv[at + 1]) : path.join(ROOT, 'resources', 'samples');
  fs.mkdirSync(outDir, { recursive: true });
  for (const [name, content] of Object.entries(demoFiles())) {
    const file = path.join(outDir, name);
    fs.writeFileSync(file, JSON.stringify(content, null, 1) + '\n');
    process.stdout.write(`wrote ${path.relative(process.cwd(), file) || file}\n`);
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main();
