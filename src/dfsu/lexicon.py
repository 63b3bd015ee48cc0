"""Word lists for the generated general corpus: topics with their own vocabulary.

Each topic has nouns, past-tense verbs, adjectives, roles and places; the corpus generator
draws from them with Zipf weights and fixed pairings (collocations), so the text carries
topic coherence and predictable structure the way natural language does.
"""

TOPICS: dict[str, dict[str, list[str]]] = {
    "astronomy": {
        "nouns": "telescope comet planet orbit nebula galaxy moon crater eclipse star asteroid "
        "observatory spectrum satellite meteor horizon lens signal cluster rocket".split(),
        "verbs": "observed tracked measured photographed mapped detected recorded charted "
        "studied located".split(),
        "adjectives": "distant bright faint frozen massive rocky red silent ancient orbital".split(),
        "roles": "astronomer pilot engineer observer navigator".split(),
        "places": ["Arecibo", "Kepler Station", "Mauna Ridge", "Lowell Crest", "Vega Hill"],
    },
    "cooking": {
        "nouns": "soup bread oven recipe sauce garlic onion pastry kitchen knife butter flour "
        "pepper salad dough broth spoon menu cheese harvest".split(),
        "verbs": "baked stirred tasted seasoned sliced roasted served boiled mixed prepared".split(),
        "adjectives": "fresh warm spicy crisp sweet bitter golden smoky tender salty".split(),
        "roles": "chef baker waiter farmer cook".split(),
        "places": "Lyon Naples Bologna Seville Porto".split(),
    },
    "football": {
        "nouns": "match goal striker referee stadium season league coach penalty ball pitch "
        "trophy defender keeper corner crowd transfer derby tackle final".split(),
        "verbs": "scored defended won lost kicked blocked trained celebrated passed missed".split(),
        "adjectives": "decisive late fierce young loyal injured famous rival narrow stunning".split(),
        "roles": "captain manager fan scout midfielder".split(),
        "places": "Manchester Turin Madrid Glasgow Lisbon".split(),
    },
    "medicine": {
        "nouns": "vaccine clinic fever symptom surgeon dose virus therapy hospital nurse patient "
        "ward tablet injury diagnosis scan blood heart lung trial".split(),
        "verbs": "treated examined diagnosed prescribed monitored healed tested injected "
        "discharged admitted".split(),
        "adjectives": "chronic acute mild severe sterile rare routine clinical early stable".split(),
        "roles": "doctor pharmacist surgeon midwife researcher".split(),
        "places": "Boston Zurich Geneva Uppsala Leiden".split(),
    },
    "sailing": {
        "nouns": "harbor vessel anchor sail storm tide mast crew island voyage wind current "
        "lighthouse compass cargo dock wave fleet hull cabin".split(),
        "verbs": "sailed anchored steered navigated crossed repaired loaded towed raised "
        "docked".split(),
        "adjectives": "rough calm salty wooden northern stormy swift heavy narrow coastal".split(),
        "roles": "sailor captain fisherman merchant pilot".split(),
        "places": "Bergen Halifax Valletta Brest Galway".split(),
    },
    "music": {
        "nouns": "concert melody violin orchestra piano choir rhythm album guitar drum song "
        "chord stage ballad symphony tenor rehearsal tune festival score".split(),
        "verbs": "played composed recorded sang rehearsed conducted tuned performed arranged "
        "released".split(),
        "adjectives": "gentle loud haunting classical lively soft modern solemn joyful brief".split(),
        "roles": "composer pianist singer conductor drummer".split(),
        "places": "Vienna Salzburg Leipzig Memphis Havana".split(),
    },
    "farming": {
        "nouns": "wheat barn tractor field cattle orchard harvest seed soil fence sheep plough "
        "river grain hay barley goat well meadow mill".split(),
        "verbs": "planted harvested watered plowed fed sold stored fenced grazed sowed".split(),
        "adjectives": "dry fertile green muddy golden early wet rich stony quiet".split(),
        "roles": "farmer shepherd miller herdsman gardener".split(),
        "places": "Iowa Normandy Kent Bavaria Tuscany".split(),
    },
    "computing": {
        "nouns": "server database network compiler kernel cache memory processor cluster "
        "program bug update disk router protocol backup query thread index script".split(),
        "verbs": "compiled deployed patched restarted configured indexed debugged cached "
        "migrated tested".split(),
        "adjectives": "fast slow stable remote parallel broken secure legacy virtual idle".split(),
        "roles": "programmer administrator analyst developer tester".split(),
        "places": "Redmond Austin Bangalore Tallinn Dublin".split(),
    },
    "history": {
        "nouns": "empire treaty castle king army revolution archive manuscript battle "
        "monastery crown border dynasty siege ruin chronicle harbor senate coin map".split(),
        "verbs": "signed conquered founded ruled besieged rebuilt defended crowned "
        "surrendered restored".split(),
        "adjectives": "medieval royal ancient bloody famous fortified lost rival noble vast".split(),
        "roles": "historian soldier monk queen envoy".split(),
        "places": "Byzantium Carthage Aachen Toledo Krakow".split(),
    },
    "weather": {
        "nouns": "rain snow cloud thunder frost drought flood breeze fog sunshine forecast "
        "temperature storm hail season valley mountain coast sky wind".split(),
        "verbs": "predicted reached covered flooded cooled warmed swept froze soaked "
        "cleared".split(),
        "adjectives": "heavy cold humid dry windy grey freezing mild sudden clear".split(),
        "roles": "forecaster pilot ranger climber resident".split(),
        "places": "Oslo Denver Reykjavik Edinburgh Innsbruck".split(),
    },
}

# Everyday words every topic mixes in.
FUNCTION = {
    "preps": "near behind across under beside beyond inside after before during".split(),
    "times": "morning evening winter summer spring autumn night week month year".split(),
    "adverbs": "quickly slowly carefully again twice early finally quietly nearly often".split(),
    "connectors": ["However", "Later", "Meanwhile", "Afterwards", "Still", "Then", "Soon"],
    "names": "Anna Boris Clara David Elena Felix Greta Hugo Irene Jonas Karin Lukas Maria Nils "
    "Olga Pavel Rosa Simon Tara Viktor".split(),
    "days": "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split(),
}

# A second domain (``corpus.second_domain``): topics whose content words appear in none of
# TOPICS, so the owner's public text (drawn from TOPICS alone) never teaches them; the
# function words and sentence shapes are the same language's.
SECOND_TOPICS: dict[str, dict[str, list[str]]] = {
    "geology": {
        "nouns": "basalt quarry fault sediment granite aquifer fossil mineral shale cavern "
        "glacier boulder strata magma quartz limestone gravel canyon geyser pebble".split(),
        "verbs": "excavated drilled sampled surveyed dated cored quarried sifted eroded "
        "polished".split(),
        "adjectives": "porous volcanic layered brittle glassy chalky molten jagged dense "
        "weathered".split(),
        "roles": "geologist driller surveyor prospector quarryman".split(),
        "places": ["Basalt Gap", "Shale Hollow", "Quartzmoor", "Cinder Flats", "Ochre Cliffs"],
    },
    "textiles": {
        "nouns": "loom spindle warp wool linen dye bobbin tapestry quilt needle fabric "
        "yarn silk seam pattern shuttle felt hem lace cotton".split(),
        "verbs": "wove spun stitched dyed knitted embroidered hemmed carded twisted "
        "bleached".split(),
        "adjectives": "woollen coarse silken indigo striped tufted plaid frayed supple "
        "embroidered".split(),
        "roles": "weaver spinner tailor dyer seamstress".split(),
        "places": ["Loomfield", "Indigo Row", "Spindlewick", "Flaxbury", "Dyers Lane"],
    },
    "railways": {
        "nouns": "locomotive carriage semaphore platform boiler sleeper junction firebox piston "
        "timetable brakeman coupling freight siding tunnel viaduct whistle gauge depot "
        "turntable".split(),
        "verbs": "shunted coupled signalled stoked braked ballasted uncoupled derailed "
        "switched inspected".split(),
        "adjectives": "steam cogwheel overhead freight sooty riveted express branch "
        "electrified disused".split(),
        "roles": "driver fireman signalman guard porter".split(),
        "places": ["Crewe Junction", "Ironbridge Halt", "Coalport", "Steamtown", "Rail End"],
    },
    "beekeeping": {
        "nouns": "hive honeycomb drone swarm nectar pollen beeswax smoker frame "
        "colony brood apiary propolis larva clover blossom veil comb honey".split(),
        "verbs": "smoked swarmed pollinated requeened wintered foraged capped "
        "extracted hived".split(),
        "adjectives": "waxen buzzing amber floral sticky hardy docile thriving "
        "overwintered".split(),
        "roles": "beekeeper apiarist forager beemaster honeyman".split(),
        "places": ["Clover Down", "Hivecombe", "Nectar Vale", "Waxley", "Bramble Apiary"],
    },
}
