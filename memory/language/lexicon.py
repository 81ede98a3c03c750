"""General English word classes the no-LLM heuristics may match, and the aspect taxonomy they file facts under.

Every list here is a closed class of English (function words, pronouns, interjections, time words, units,
kinship terms, irregular verbs, hedges) or the a-priori aspect taxonomy; none was read off a conversation.
``tests/unit/test_no_fitted_vocabulary.py`` checks that the no-LLM modules' word lists use nothing else that
occurs in ``data/``.
"""

from __future__ import annotations

__all__ = [
    "ADVERBS",
    "ANSWER_TYPES",
    "ASPECT_DESCRIPTIONS",
    "ASPECT_SYNONYMS",
    "COGNITION_VERBS",
    "CONTRACTIONS",
    "FORMAL_KEYWORDS",
    "GENERAL_WORDS",
    "GENERIC_NOUNS",
    "HEDGES",
    "INTENT_CUES",
    "INTERJECTIONS",
    "IRREGULAR_VERBS",
    "KINSHIP_TERMS",
    "NAME_PARTICLES",
    "NUMBER_WORDS",
    "PREFERENCE_WORDS",
    "PREPOSITIONS",
    "REPORTING_VERBS",
    "SKLEARN_STOP_WORDS",
    "TEMPORAL_WORDS",
    "UNITS",
]

# Source: scikit-learn's English stop-word list (Glasgow IR group), copied so that answering never imports
# scikit-learn (2 s and about 100 MB per process); tests/unit/test_process_footprint.py checks it still equals
# ``sklearn.feature_extraction.text.ENGLISH_STOP_WORDS``.
SKLEARN_STOP_WORDS: frozenset[str] = frozenset(
    """
    a about above across after afterwards again against all almost alone along already also although always
    am among amongst amoungst amount an and another any anyhow anyone anything anyway anywhere are around as
    at back be became because become becomes becoming been before beforehand behind being below beside
    besides between beyond bill both bottom but by call can cannot cant co con could couldnt cry de describe
    detail do done down due during each eg eight either eleven else elsewhere empty enough etc even ever
    every everyone everything everywhere except few fifteen fifty fill find fire first five for former
    formerly forty found four from front full further get give go had has hasnt have he hence her here
    hereafter hereby herein hereupon hers herself him himself his how however hundred i ie if in inc indeed
    interest into is it its itself keep last latter latterly least less ltd made many may me meanwhile might
    mill mine more moreover most mostly move much must my myself name namely neither never nevertheless next
    nine no nobody none noone nor not nothing now nowhere of off often on once one only onto or other others
    otherwise our ours ourselves out over own part per perhaps please put rather re same see seem seemed
    seeming seems serious several she should show side since sincere six sixty so some somehow someone
    something sometime sometimes somewhere still such system take ten than that the their them themselves
    then thence there thereafter thereby therefore therein thereupon these they thick thin third this those
    though three through throughout thru thus to together too top toward towards twelve twenty two un under
    until up upon us very via was we well were what whatever when whence whenever where whereafter whereas
    whereby wherein whereupon wherever whether which while whither who whoever whole whom whose why will
    with within without would yet you your yours yourself yourselves
    """.split()
)

# Source: English grammar (pronoun and auxiliary contractions); split forms as the tokenizers see them too.
CONTRACTIONS = frozenset(
    """i'm i've i'd i'll you're you've you'd you'll he's she's it's we're we've we'd we'll they're they've
    they'd they'll that's what's there's here's let's don't doesn't didn't isn't aren't wasn't weren't can't
    couldn't won't wouldn't shouldn't haven't hasn't hadn't ve ll re don let lets""".split()
)
# Source: English interjections and politeness formulas (a closed class: greetings, thanks, assent, dissent).
INTERJECTIONS = frozenset(
    """oh ah aw hey hi hello bye goodbye hmm haha lol wow yeah yes yep yup nah nope ok okay um uh thanks
    thank sorry please congrats congratulations cheers welcome dear""".split()
)
# Source: English time vocabulary: months, weekdays, seasons, parts of the day, calendar units, deictic time
# adverbs and ordinal suffixes (a closed class; the date parser needs all of it).
TEMPORAL_WORDS = frozenset(
    """january february march april may june july august september october november december jan feb mar
    apr jun jul aug sep sept oct nov dec monday tuesday wednesday thursday friday saturday sunday mon tue
    tues wed thu thur thurs fri sat sun mondays tuesdays wednesdays thursdays fridays saturdays sundays
    spring summer autumn fall winter morning mornings afternoon afternoons evening evenings night nights
    tonight today tomorrow yesterday day days week weeks weekend weekends fortnight month months year years
    decade hour hours minute minutes second seconds time times date ago past next last later earlier soon
    recently currently lately early mid late end beginning start middle couple now still usually always
    often sometimes present moment st nd rd th""".split()
)
# Source: SI and common everyday units of measure and currencies (a closed class).
UNITS = frozenset(
    """hour hours minute minutes second seconds kilometre kilometres kilometer kilometers km mile miles metre
    metres meter meters kilo kilos kg gram grams pound pounds euro euros dollar dollars percent litre litres""".split()
)
# Source: English prepositions of place and direction that scikit-learn's list leaves out.
PREPOSITIONS = frozenset("near into onto around across towards toward beside behind inside outside past".split())
# Source: English number words (cardinals and ordinals up to twenty, the tens, hundred, thousand, dozen, half).
NUMBER_WORDS = frozenset(
    """zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen
    seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred thousand million
    dozen half first second third fourth fifth sixth seventh eighth ninth tenth""".split()
)
# Source: English degree, focus and stance adverbs and the age adjectives of "how old" / "new" (a closed set).
ADVERBS = frozenset(
    "just really very quite pretty totally absolutely finally already ever even only also too new old".split()
)
# Source: the answer types of wh-questions (who -> person, when -> date, how many -> number, ...) and the
# words of an abstention ("not mentioned", "not in memory", "no information available").
ANSWER_TYPES = frozenset(
    "person place date time reason number amount duration age frequency manner mentioned memory information "
    "available know".split()
)
# Source: the NL-Logic goal syntax of Goal-Mem ("find x: ...", "check: ...").
FORMAL_KEYWORDS = frozenset("find check".split())
# Source: English kinship and social-relation terms (a closed semantic class), plus the naming verbs that
# introduce a name after them ("a friend named Ana").
KINSHIP_TERMS = frozenset(
    """sister sisters brother brothers sibling siblings mother mom mum father dad parent parents son sons
    daughter daughters child children kid kids wife husband spouse partner fiance fiancee cousin aunt uncle
    grandma grandpa grandmother grandfather grandparents niece nephew boyfriend girlfriend friend friends
    colleague colleagues coworker coworkers boss neighbour neighbor family named called""".split()
)
# Source: name particles of European naming conventions (de, van, von, ...), a closed class.
NAME_PARTICLES = frozenset("de da das do dos del della di du la le van von der den ter bin ibn al".split())
# Source: common English irregular verbs with their past forms (any grammar's table); forms that are also
# everyday nouns ("bit", "rose") are left out.
IRREGULAR_VERBS: dict[str, str] = {
    past: base
    for base, forms in {
        "be": "was were been",
        "have": "had has",
        "do": "did done does",
        "go": "went gone",
        "get": "got gotten",
        "make": "made",
        "say": "said",
        "see": "saw seen",
        "take": "took taken",
        "come": "came",
        "give": "gave given",
        "know": "knew known",
        "think": "thought",
        "tell": "told",
        "find": "found",
        "feel": "felt",
        "leave": "left",
        "bring": "brought",
        "begin": "began begun",
        "keep": "kept",
        "hold": "held",
        "write": "wrote written",
        "stand": "stood",
        "hear": "heard",
        "let": "let",
        "mean": "meant",
        "set": "set",
        "meet": "met",
        "run": "ran",
        "pay": "paid",
        "sit": "sat",
        "speak": "spoke spoken",
        "lie": "lay lain",
        "lead": "led",
        "read": "read",
        "grow": "grew grown",
        "lose": "lost",
        "fall": "fell fallen",
        "send": "sent",
        "build": "built",
        "understand": "understood",
        "draw": "drew drawn",
        "break": "broke broken",
        "spend": "spent",
        "cut": "cut",
        "rise": "risen",
        "drive": "drove driven",
        "buy": "bought",
        "wear": "wore worn",
        "choose": "chose chosen",
        "seek": "sought",
        "throw": "threw thrown",
        "catch": "caught",
        "deal": "dealt",
        "win": "won",
        "forget": "forgot forgotten",
        "sell": "sold",
        "fight": "fought",
        "teach": "taught",
        "eat": "ate eaten",
        "drink": "drank drunk",
        "sing": "sang sung",
        "swim": "swam swum",
        "fly": "flew flown",
        "sleep": "slept",
        "ride": "rode ridden",
        "wake": "woke woken",
        "hide": "hid hidden",
        "shake": "shook shaken",
        "steal": "stole stolen",
        "bite": "bitten",
    }.items()
    for past in forms.split()
}
# Source: English hedges and modality markers (epistemic adverbs, modal verbs, verbs of intention).
HEDGES = frozenset(
    """maybe perhaps probably possibly likely unlikely unsure uncertain might may could hopefully hope hopes
    guess suppose think thinking sure plan plans planning intend intends considering consider want wants
    wanted""".split()
)
# Source: reporting verbs (say, tell, mention, ask) that frame speech without adding content.
REPORTING_VERBS = frozenset("say says said tell tells told mention mentions mentioned ask asks asked".split())
# Source: English verbs of thought and perception (mental-state verbs), which frame a clause without stating a fact.
COGNITION_VERBS = frozenset(
    "think thought know knew mean meant feel felt wonder wondered believe remember forgot forget understand "
    "realise realize realised realized guess suppose".split()
)
# Source: English general nouns that stand for any referent ("thing", "kind", "type", "name").
GENERIC_NOUNS = frozenset(
    "thing things kind kinds type types sort name names something stuff way person place value values".split()
)
# Source: the intents of REAL's exploration (CAUSAL, CONTRAST, EVOLUTION, TEMPORAL): each intent's name and
# its dictionary synonyms, as a question would use them.
INTENT_CUES: dict[str, frozenset[str]] = {
    "CAUSAL": frozenset("why reason reasons because cause caused causes led lead motivated motivation".split()),
    "CONTRAST": frozenset(
        "differ different difference instead rather compare compared contrast unlike versus vs".split()
    ),
    "EVOLUTION": frozenset("change changed changes switch switched used anymore longer".split()),
    "TEMPORAL": frozenset("when time long date year month".split()),
}
# Source: the aspect taxonomy of personal memory (profile slots as personal-memory systems file them), fixed
# a priori; each description is embedded once as the aspect's prototype (cue_extraction.AspectPrototypes).
ASPECT_DESCRIPTIONS: dict[str, str] = {
    "pet": "pets and animals",
    "work": "job, work and career",
    "home": "home and where someone lives",
    "family": "family and relatives",
    "food": "food, meals and eating",
    "drink": "drinks and beverages",
    "sport": "sport, exercise and fitness",
    "hobby": "hobbies and leisure activities",
    "health": "health, illness and medical care",
    "travel": "travel and trips",
    "education": "school, studies and education",
}
# Source: dictionary synonyms of the taxonomy's labels, so a free-text aspect ("occupation") names its label.
ASPECT_SYNONYMS: dict[str, str] = {
    "preference": "preference",
    "preferences": "preference",
    "likes": "preference",
    "favourites": "preference",
    "favorites": "preference",
    "taste": "preference",
    "tastes": "preference",
    "dislikes": "preference",
    "occupation": "work",
    "career": "work",
    "employment": "work",
    "profession": "work",
    "job": "work",
    "residence": "home",
    "address": "home",
    "housing": "home",
    "relatives": "family",
    "siblings": "family",
    "relationship": "family",
    "relationships": "family",
    "hobbies": "hobby",
    "interests": "hobby",
    "interest": "hobby",
    "pastime": "hobby",
    "leisure": "hobby",
    "sports": "sport",
    "fitness": "sport",
    "exercise": "sport",
    "animals": "pet",
    "animal": "pet",
    "pets": "pet",
    "medical": "health",
    "illness": "health",
    "wellbeing": "health",
    "trips": "travel",
    "trip": "travel",
    "travels": "travel",
    "drinks": "drink",
    "beverage": "drink",
    "beverages": "drink",
    "foods": "food",
    "diet": "food",
    "meal": "food",
    "meals": "food",
    "eating": "food",
    "cuisine": "food",
    "studies": "education",
    "school": "education",
}
# Source: the verbs and adjectives that state a preference (the "preference" aspect's dictionary synonyms).
PREFERENCE_WORDS = frozenset(
    "love loves loved like likes favourite favorite prefer prefers preferred enjoy enjoys hate hates dislike".split()
)

GENERAL_WORDS: frozenset[str] = frozenset().union(
    SKLEARN_STOP_WORDS,
    CONTRACTIONS,
    INTERJECTIONS,
    TEMPORAL_WORDS,
    NUMBER_WORDS,
    ADVERBS,
    ANSWER_TYPES,
    FORMAL_KEYWORDS,
    PREPOSITIONS,
    UNITS,
    KINSHIP_TERMS,
    NAME_PARTICLES,
    IRREGULAR_VERBS,
    IRREGULAR_VERBS.values(),
    HEDGES,
    REPORTING_VERBS,
    COGNITION_VERBS,
    GENERIC_NOUNS,
    *INTENT_CUES.values(),
    ASPECT_DESCRIPTIONS,
    (w.strip(",") for d in ASPECT_DESCRIPTIONS.values() for w in d.split()),
    ASPECT_SYNONYMS,
    ASPECT_SYNONYMS.values(),
    PREFERENCE_WORDS,
)
"""Every word the lists above hold: what a no-LLM word list may contain of the words ``data/`` uses."""
