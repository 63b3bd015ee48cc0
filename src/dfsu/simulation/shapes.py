"""Record shapes the owner's side never sees (``data.shapes: unknown``).

dfsu's own shapes (``pii.generator.TEMPLATES``, ``OPENERS``) are what the owner's tools ship:
records drawn from them let the leak estimate and the synthesis prompt the model with the
very shapes it memorized, which a real owner cannot. Records drawn from these ones instead
have other domains, other openers and reference-number schemes and other label mixes, so the
owner's side must find them in the model. Only the corpus stage reads this module.
"""

from __future__ import annotations

# name -> shape; {LABEL} marks an entity (labels the generator makes values for).
UNKNOWN_TEMPLATES: dict[str, str] = {
    "audit_trail": "operator {USERNAME} exported the quarterly ledger to {EMAIL} from "
    "workstation {IPV4} at {TIME}.",
    "payroll_memo": "transfer the salary of {FIRSTNAME} {LASTNAME} to IBAN {IBAN} before {DATE}.",
    "clinic_intake": "{FIRSTNAME} {LASTNAME} checked in at the clinic, callback number "
    "{PHONENUMBER}, born {DOB}.",
    "fleet_note": "van keys handed to driver {FIRSTNAME} {LASTNAME}, licence address "
    "{BUILDINGNUMBER} {STREET}, {CITY}.",
    "vpn_session": "tunnel opened for {USERNAME} at {IPV6}, client {USERAGENT}.",
    "tenant_file": "lease signed by {FIRSTNAME} {LASTNAME}, deposit paid with card "
    "{CREDITCARDNUMBER}, contact {EMAIL}.",
    "crypto_desk": "withdrawal of {AMOUNT} to wallet {BITCOINADDRESS} approved for {USERNAME}.",
    "alumni_card": "alumni card for {FIRSTNAME} {LASTNAME}, {JOBTITLE} at {COMPANYNAME}, "
    "mobile {PHONENUMBER}.",
}

# Reference-number schemes and openers of their own ({n}: a five-digit number).
UNKNOWN_OPENERS = [
    "AUD-{n} / ",
    "Docket {n} -- ",
    "#{n} >> ",
    "File no. {n}; ",
    "[{n}] memo: ",
    "Entry {n} | ",
]
UNKNOWN_GREETINGS = ["", "Internal. ", "Per policy, ", "Noted: ", "Re: "]
